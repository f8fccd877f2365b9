package engine

import (
	"testing"

	"github.com/pinfer/pinfer/internal/fixtures"
	"github.com/stretchr/testify/require"
)

// On a model without sparse FFN layers the default predictor and dense run
// (dense is what runs anyway); any predictor named beside them is an error,
// not silently ignored.
func TestPredictorNeedsSparseLayers(t *testing.T) {
	m, err := Load(fixtures.Path(t, "stories260K", "stories260K.gguf"), "")
	require.NoError(t, err)
	defer m.Close()
	require.Empty(t, m.Prog.Layers)
	for _, name := range []string{"", "dense"} {
		p, err := m.Predictor(name)
		require.NoError(t, err, "%q", name)
		require.Equal(t, "dense", p.Name())
	}
	for _, name := range []string{"oracle", "mlp", "static", "plugins/topk.go"} {
		_, err := m.Predictor(name)
		require.ErrorContains(t, err, "no sparse FFN layers", name)
		require.ErrorContains(t, err, name)
	}
}
