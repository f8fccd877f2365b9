//go:build cuda

package cuda_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/pinfer/pinfer/convert"
	"github.com/pinfer/pinfer/engine"
	"github.com/pinfer/pinfer/hybrid"
	"github.com/pinfer/pinfer/internal/fixtures"
	"github.com/pinfer/pinfer/ops"
	"github.com/pinfer/pinfer/sample"
	"github.com/stretchr/testify/require"
)

// A mixture of experts under a budget larger than the model: its attention
// and output go to the GPU, its routers and experts stay on the CPU (as
// llama.cpp's --cpu-moe), and the greedy ids are transformers' for the
// Mixtral fixture, as on the CPU alone.
func TestHybridMoEExpertsOnCPU(t *testing.T) {
	dir := fixtures.Path(t, "arch", "mixtral-relu-moe")
	path := filepath.Join(t.TempDir(), "moe-f32.gguf")
	require.NoError(t, convert.Convert(dir, path, convert.Options{Type: ops.F32, Logf: t.Logf}))
	var ref struct {
		Prompts []struct {
			IDs       []int `json:"ids"`
			GreedyIDs []int `json:"greedy_ids"`
		} `json:"prompts"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "reference.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &ref))
	require.NotEmpty(t, ref.Prompts)

	m, err := engine.Load(path, "")
	require.NoError(t, err)
	defer m.Close()
	pred, err := m.Predictor("")
	require.NoError(t, err)
	pool := ops.NewPool(8)
	defer pool.Close()
	plan, err := hybrid.Plan(m, hybrid.Options{Budget: 2 * fileSize(t, path), Reset: true, Pool: pool, Log: os.Stderr})
	require.NoError(t, err)
	r := onGPU(t, m, plan)
	resident := map[*ops.Matrix]bool{}
	for _, d := range r.Dense {
		resident[d] = true
	}
	for _, n := range m.Prog.Nodes {
		switch n.Op.Name {
		case "matmul", "output":
			require.True(t, resident[n.W[0].M], "%s on the GPU", n.W[0].Name)
		case "moe":
			for _, w := range n.W {
				if w != nil && w.M != nil {
					require.False(t, resident[w.M], "%s stays on the CPU", w.Name)
				}
			}
		}
	}
	require.Empty(t, r.FFNs)
	for k, p := range ref.Prompts {
		res, err := m.GenerateIDs(p.IDs, engine.Options{N: len(p.GreedyIDs), Pool: pool, Sample: sample.Params{Temp: 0}, Predictor: pred})
		require.NoError(t, err)
		require.Equal(t, p.GreedyIDs, res.Tokens, "prompt %d", k)
	}
}
