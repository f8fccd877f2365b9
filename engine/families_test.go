package engine

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/pinfer/pinfer/convert"
	"github.com/pinfer/pinfer/internal/fixtures"
	"github.com/pinfer/pinfer/ops"
	"github.com/pinfer/pinfer/sample"
	"github.com/stretchr/testify/require"
)

type archRef struct {
	Prompts []struct {
		IDs       []int       `json:"ids"`
		GreedyIDs []int       `json:"greedy_ids"`
		Logits    [][]float32 `json:"logits"` // every prompt position
	} `json:"prompts"`
}

// convertArch converts one fixture of shared/models/arch to f32 once per run.
func convertArch(t *testing.T, name string) string {
	t.Helper()
	if p, ok := convertOnce.Load("arch/" + name); ok {
		return p.(string)
	}
	if convertDir == "" {
		d, err := os.MkdirTemp("", "pinfer-test-")
		require.NoError(t, err)
		convertDir = d
	}
	out := filepath.Join(convertDir, name+"-f32.gguf")
	require.NoError(t, convert.Convert(fixtures.Path(t, "arch", name), out, convert.Options{Type: ops.F32, Logf: t.Logf}))
	convertOnce.Store("arch/"+name, out)
	return out
}

// Every family fixture, converted to f32 and run by the graph picked from its
// metadata, gives transformers' fp32 logits at every prompt position and its
// 24 greedy ids.
func TestFamiliesMatchTransformers(t *testing.T) {
	graphs := map[string]string{
		"llama-relu": "relu-llama", "mistral-relu": "relu-llama", "mixtral-relu-moe": "relu-mixtral",
		"falcon-relu": "relu-falcon", "falcon40b-relu": "relu-falcon", "opt-relu": "opt",
	}
	entries, err := os.ReadDir(fixtures.Path(t, "arch"))
	require.NoError(t, err)
	require.Len(t, entries, len(graphs), "a fixture without a test, or a test without its fixture")
	pool := ops.NewPool(2)
	defer pool.Close()
	for _, e := range entries {
		t.Run(e.Name(), func(t *testing.T) {
			var ref archRef
			b, err := os.ReadFile(fixtures.Path(t, "arch", e.Name(), "reference.json"))
			require.NoError(t, err)
			require.NoError(t, json.Unmarshal(b, &ref))
			require.Len(t, ref.Prompts, 3)

			m, err := Load(convertArch(t, e.Name()), "")
			require.NoError(t, err)
			defer m.Close()
			require.Equal(t, graphs[e.Name()], m.Spec.Name)
			for k, p := range ref.Prompts {
				sess := m.NewSession(64, pool)
				logits, err := sess.Forward(p.IDs, true)
				require.NoError(t, err)
				require.Equal(t, len(p.IDs), logits.Rows)
				for pos, want := range p.Logits {
					require.Len(t, want, logits.Cols)
					worst, at := 0.0, 0
					for i, w := range want {
						if d := math.Abs(float64(w - logits.Row(pos)[i])); d > worst {
							worst, at = d, i
						}
					}
					require.Less(t, worst, 1e-3, "prompt %d position %d: max |logit - transformers| at id %d", k, pos, at)
				}
				res, err := m.GenerateIDs(p.IDs, Options{N: len(p.GreedyIDs), Pool: pool, Sample: sample.Params{Temp: 0}})
				require.NoError(t, err)
				require.Equal(t, p.GreedyIDs, res.Tokens, "prompt %d", k)

				// The oracle skips the neurons that do not fire and changes nothing.
				oracle, err := m.Predictor("oracle")
				require.NoError(t, err)
				sparse, err := m.GenerateIDs(p.IDs, Options{N: len(p.GreedyIDs), Pool: pool, Sample: sample.Params{Temp: 0}, Predictor: oracle})
				require.NoError(t, err)
				require.Equal(t, p.GreedyIDs, sparse.Tokens, "prompt %d, oracle", k)
				require.NotEmpty(t, sparse.Stats.ActiveFraction, "the graph has sparse FFNs")
				for l, f := range sparse.Stats.ActiveFraction {
					require.Less(t, f, 0.9, "prompt %d: FFN %d computed %.2f of its neurons", k, l, f)
				}
			}
		})
	}
}

func TestGenerateIDsErrors(t *testing.T) {
	m, err := Load(convertArch(t, "opt-relu"), "")
	require.NoError(t, err)
	defer m.Close()
	_, err = m.GenerateIDs(nil, Options{N: 1})
	require.ErrorContains(t, err, "no prompt ids")
	_, err = m.GenerateIDs([]int{1, 5000}, Options{N: 1})
	require.ErrorContains(t, err, fmt.Sprintf("prompt id 5000 is outside the vocabulary of %d", m.Prog.Vocab))
}

// Checkpoints of the same layouts with their usual activations pick the
// dense graphs llama.cpp's files would: by arch, and for Mixtral by the
// presence of llama.expert_count.
func TestDenseFamiliesSelected(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		fixture, key, act, graph string
	}{
		{"llama-relu", "hidden_act", "silu", "llama"},
		{"mistral-relu", "hidden_act", "silu", "llama"},
		{"mixtral-relu-moe", "hidden_act", "silu", "mixtral"},
		{"falcon-relu", "activation", "gelu", "falcon"},
		{"falcon40b-relu", "activation", "gelu", "falcon"},
	} {
		t.Run(c.fixture, func(t *testing.T) {
			hf, _ := copyFixture(t, c.fixture, t.TempDir(), func(cfg map[string]any) { cfg[c.key] = c.act })
			out := filepath.Join(dir, c.fixture+".gguf")
			require.NoError(t, convert.Convert(hf, out, convert.Options{Type: ops.F16, Logf: t.Logf}))
			m, err := Load(out, "")
			require.NoError(t, err)
			defer m.Close()
			require.Equal(t, c.graph, m.Spec.Name)
			res, err := m.GenerateIDs([]int{1, 17, 230}, Options{N: 4, Threads: 1})
			require.NoError(t, err)
			require.Len(t, res.Tokens, 4)
		})
	}
}
