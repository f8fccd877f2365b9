package graph

import (
	"encoding/json"
	"math"
	"os"
	"testing"

	"github.com/pinfer/pinfer/gguf"
	"github.com/pinfer/pinfer/internal/fixtures"
	"github.com/pinfer/pinfer/models"
	"github.com/pinfer/pinfer/ops"
	"github.com/stretchr/testify/require"
)

// builtinProgram binds the built-in model's file to its built-in graph.
func builtinProgram(t *testing.T) (*Program, *gguf.File) {
	path, err := models.DefaultModelPath()
	require.NoError(t, err)
	f, err := gguf.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	names, texts := models.Graphs()
	var specs []*Spec
	for i, n := range names {
		s, err := ParseSpec(n, texts[i])
		require.NoError(t, err)
		specs = append(specs, s)
	}
	spec, err := Select(specs, f)
	require.NoError(t, err)
	p, err := Build(spec, f)
	require.NoError(t, err)
	return p, f
}

// The hidden state Session.Hidden returns is what the output projection
// reads: output.weight times its last row gives PyTorch's logits of the
// last position (reference.json), which pins it independently of the
// engine's own output op.
func TestHiddenGivesPyTorchLogits(t *testing.T) {
	p, f := builtinProgram(t)
	h, err := p.HiddenNode()
	require.NoError(t, err)
	require.Equal(t, "rms_norm", p.Nodes[h].Op.Name, "the output reads the final norm")

	ti, ok := f.Tensor("output.weight")
	require.True(t, ok)
	dim, vocab := int(ti.Dims[0]), int(ti.Dims[1])
	w := make([]float32, dim*vocab)
	require.NoError(t, ops.Dequantize(ti.Type, w, f.Data(ti)))

	b, err := os.ReadFile(fixtures.Path(t, "shakespeare-relu-6m", "reference.json"))
	require.NoError(t, err)
	var ref struct {
		Prompts []struct {
			IDs        []int     `json:"ids"`
			LastLogits []float64 `json:"last_logits"`
		} `json:"prompts"`
	}
	require.NoError(t, json.Unmarshal(b, &ref))
	require.NotEmpty(t, ref.Prompts)
	for _, pr := range ref.Prompts {
		s := p.NewSession(64, nil)
		hid, err := s.Hidden(pr.IDs)
		require.NoError(t, err)
		require.Equal(t, len(pr.IDs), hid.Rows)
		require.Equal(t, dim, hid.Cols)
		require.Equal(t, len(pr.IDs), s.Pos())
		last := hid.Row(hid.Rows - 1)
		require.Len(t, pr.LastLogits, vocab)
		worst := 0.0
		for v := range vocab {
			var dot float64
			for k, x := range last {
				dot += float64(w[v*dim+k]) * float64(x)
			}
			worst = math.Max(worst, math.Abs(dot-pr.LastLogits[v]))
		}
		require.Less(t, worst, 1e-3, "prompt %v: max |W_out·h - PyTorch logit|", pr.IDs)

		// Forward's rows of every position agree with Hidden's.
		rows := make([][]float32, hid.Rows)
		for i := range rows {
			rows[i] = append([]float32(nil), hid.Row(i)...)
		}
		s2 := p.NewSession(64, nil)
		logits, err := s2.Forward(pr.IDs, true)
		require.NoError(t, err)
		for i, row := range rows {
			for v := 0; v < vocab; v += 97 {
				var dot float64
				for k, x := range row {
					dot += float64(w[v*dim+k]) * float64(x)
				}
				require.InDelta(t, float64(logits.Row(i)[v]), dot, 1e-3, "position %d token %d", i, v)
			}
		}
	}
}

// Sessions run together give each token's hidden row they get alone, and
// a session goes on from its cache: prefill then a decode step give the
// rows of the whole prompt.
func TestHiddenBatchAndDecode(t *testing.T) {
	p, err := build(t, llamaTOML(t))
	require.NoError(t, err)
	prompts := [][]int{{1, 403, 407}, {1}, {1, 385, 410, 317, 12}}
	var alone [][]float32
	for _, pr := range prompts {
		s := p.NewSession(64, nil)
		hid, err := s.Hidden(pr)
		require.NoError(t, err)
		require.Equal(t, len(pr), hid.Rows)
		for i := range hid.Rows {
			alone = append(alone, append([]float32(nil), hid.Row(i)...))
		}
	}
	r := p.NewRunner(nil)
	var seqs []*Session
	for range prompts {
		seqs = append(seqs, p.NewSession(64, nil))
	}
	hid, err := r.Hidden(seqs, prompts)
	require.NoError(t, err)
	require.Equal(t, len(alone), hid.Rows)
	for i, row := range alone {
		require.InDeltaSlice(t, row, hid.Row(i), 1e-4, "row %d", i)
	}
	// Prefill then one more token: the last row is the whole prompt's.
	s := p.NewSession(64, nil)
	_, err = s.Hidden(prompts[2][:4])
	require.NoError(t, err)
	step, err := s.Hidden(prompts[2][4:])
	require.NoError(t, err)
	require.Equal(t, 1, step.Rows)
	require.InDeltaSlice(t, alone[len(alone)-1], step.Row(0), 1e-4)
	// Logits after Hidden use the same plans: Forward still works.
	_, err = s.Forward([]int{5}, false)
	require.NoError(t, err)
}
