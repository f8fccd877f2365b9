//go:build cuda

package cuda_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/pinfer/pinfer/convert"
	"github.com/pinfer/pinfer/engine"
	"github.com/pinfer/pinfer/hybrid"
	"github.com/pinfer/pinfer/internal/fixtures"
	"github.com/pinfer/pinfer/ops"
	"github.com/pinfer/pinfer/ops/cuda"
	"github.com/pinfer/pinfer/placement"
	"github.com/pinfer/pinfer/sample"
	"github.com/stretchr/testify/require"
)

// A mixture of experts on the GPU, transformers' greedy ids for the Mixtral
// fixture throughout: under a budget larger than the model every router and
// expert is placed (each expert's gate, up and down as its own matrix), and
// the oracle's chosen neurons give way to the whole expert there; with only
// the attention and output placed, the experts run on the CPU.
func TestHybridMoE(t *testing.T) {
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
	pool := ops.NewPool(8)
	defer pool.Close()
	check := func(predName string) {
		pred, err := m.Predictor(predName)
		require.NoError(t, err)
		for k, p := range ref.Prompts {
			res, err := m.GenerateIDs(p.IDs, engine.Options{N: len(p.GreedyIDs), Pool: pool, Sample: sample.Params{Temp: 0}, Predictor: pred})
			require.NoError(t, err)
			require.Equal(t, p.GreedyIDs, res.Tokens, "prompt %d, predictor %q", k, predName)
		}
		require.NoError(t, ops.Device.(*cuda.Backend).Err())
	}
	moeWeights := func(yes func(*ops.Matrix) bool) int {
		n := 0
		for _, nd := range m.Prog.Nodes {
			if nd.Op.Name != "moe" {
				continue
			}
			nE := nd.W[0].M.Rows
			n += b2i(yes(nd.W[0].M))
			for _, w := range nd.W[1:4] {
				for e := range nE {
					n += b2i(yes(ops.ExpertRows(w.M, e, w.M.Rows/nE)))
				}
			}
		}
		return n
	}

	t.Run("all", func(t *testing.T) {
		plan, err := hybrid.Plan(m, hybrid.Options{Budget: 2 * fileSize(t, path), Reset: true, Pool: pool, Log: os.Stderr})
		require.NoError(t, err)
		r := onGPU(t, m, plan)
		resident := func(x *ops.Matrix) bool { return slices.Contains(r.Dense, x) }
		all := moeWeights(func(*ops.Matrix) bool { return true })
		require.Equal(t, 2*(1+3*4), all, "two layers of a router and four experts")
		require.Equal(t, all, moeWeights(resident), "every router and expert on the GPU")
		check("")
		check("oracle")
	})
	t.Run("attention", func(t *testing.T) {
		r := onGPU(t, m, &placement.Plan{Dense: []string{"blk.0.attn", "blk.1.attn", "output"}})
		require.Len(t, r.Dense, 9)
		require.Zero(t, moeWeights(func(x *ops.Matrix) bool { return slices.Contains(r.Dense, x) }))
		check("")
	})
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
