package profile

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/pinfer/pinfer/convert"
	"github.com/pinfer/pinfer/engine"
	"github.com/pinfer/pinfer/internal/fixtures"
	"github.com/pinfer/pinfer/ops"
	"github.com/pinfer/pinfer/predictors"
	"github.com/pinfer/pinfer/sample"
	"github.com/stretchr/testify/require"
)

// The sparse path on every family: profile a converted fixture (an entry per
// FFN, experts apart), write and read the statistics back, and run it with
// the static predictor built from them.
func TestProfileEveryFamily(t *testing.T) {
	entries, err := os.ReadDir(fixtures.Path(t, "arch"))
	require.NoError(t, err)
	pool := ops.NewPool(2)
	defer pool.Close()
	for _, e := range entries {
		t.Run(e.Name(), func(t *testing.T) {
			dir := t.TempDir()
			out := filepath.Join(dir, "m.gguf")
			require.NoError(t, convert.Convert(fixtures.Path(t, "arch", e.Name()), out, convert.Options{Type: ops.F32, Logf: t.Logf}))
			m, err := engine.Load(out, "")
			require.NoError(t, err)
			defer m.Close()
			tokens := make([]int, 96)
			for i := range tokens {
				tokens[i] = (i*37 + 11) % m.Prog.Vocab
			}
			s, err := RunTokens(m, tokens, Options{Ctx: 32, Pool: pool})
			require.NoError(t, err)
			require.Len(t, s.Layers, len(m.Prog.Layers))
			for _, l := range s.Layers {
				require.Greater(t, l.MeanActiveFraction, 0.0, "layer %d expert %d", l.Layer, l.Expert)
				require.Less(t, l.MeanActiveFraction, 1.0, "layer %d expert %d", l.Layer, l.Expert)
			}
			path := filepath.Join(dir, "stats.json")
			require.NoError(t, predictors.WriteStats(path, s))
			require.NoError(t, m.AttachStats(path))
			p, err := m.Predictor("static")
			require.NoError(t, err)
			res, err := m.GenerateIDs([]int{1, 17, 230}, engine.Options{N: 8, Pool: pool, Sample: sample.Params{Temp: 0}, Predictor: p})
			require.NoError(t, err)
			require.Len(t, res.Tokens, 8)
			require.Equal(t, "static", res.Stats.Predictor)
		})
	}
}
