package synth

import (
	"path/filepath"
	"testing"

	"github.com/pinfer/pinfer/engine"
	"github.com/pinfer/pinfer/ops"
	"github.com/stretchr/testify/require"
)

// plugins/mlp.go is the built-in mlp predictor as a script: on a model with
// fc1/fc2 the two choose the same neurons, so runs agree token for token and
// in every layer's active fraction. (`pinfer bench --mode sparse,plugins/mlp.go`
// measures what the interpreter costs.)
func TestMLPPluginMatchesBuiltin(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.gguf")
	require.NoError(t, Write(path, Options{Shape: small, Active: 0.2, Type: ops.F16, Seed: 9}, nil))
	m, err := engine.Load(path, "")
	require.NoError(t, err)
	defer m.Close()
	var runs []*engine.Result
	for _, name := range []string{"mlp", "../plugins/mlp.go"} {
		p, err := m.Predictor(name)
		require.NoError(t, err)
		res, err := m.Generate(engine.Options{Prompt: "hello synthetic world", N: 16, Sample: sampleGreedy(), Predictor: p})
		require.NoError(t, err)
		runs = append(runs, res)
	}
	require.Equal(t, runs[0].Tokens, runs[1].Tokens)
	require.Equal(t, runs[0].Stats.ActiveFraction, runs[1].Stats.ActiveFraction)
	require.Less(t, runs[0].Stats.ActiveFraction[0], 0.5)
}
