package train

import (
	"testing"

	"github.com/pinfer/pinfer/engine"
	"github.com/pinfer/pinfer/internal/fixtures"
	"github.com/stretchr/testify/require"
)

// A model without sparse FFN layers has nothing to evaluate: an error, not
// "mean recall 0" over 0 positions.
func TestEvaluateNeedsSparseLayers(t *testing.T) {
	m, err := engine.Load(fixtures.Path(t, "stories260K", "stories260K.gguf"), "")
	require.NoError(t, err)
	defer m.Close()
	_, err = Evaluate(m, nil, m.Encode("Once upon a time there was a girl."), 8, nil, nil)
	require.ErrorContains(t, err, "no sparse FFN layers")
}
