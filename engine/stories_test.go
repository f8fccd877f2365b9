package engine

import (
	"math"
	"os"
	"testing"

	"github.com/pinfer/pinfer/internal/fixtures"
	"github.com/pinfer/pinfer/ops"
	"github.com/pinfer/pinfer/sample"
	"github.com/stretchr/testify/require"
)

// llama.cpp's own GGUF of stories260K: 200 greedy steps from BOS must give
// the reference text exactly, and each step's top-5 logits must agree with
// the reference trace.
func TestStories260KGreedy(t *testing.T) {
	m, err := Load(fixtures.Path(t, "stories260K", "stories260K.gguf"), "")
	require.NoError(t, err)
	defer m.Close()
	want, err := os.ReadFile(fixtures.Path(t, "stories260K", "expected_t0_n200.txt"))
	require.NoError(t, err)

	res, err := m.Generate(Options{N: 200, Ctx: 512, Threads: 2, Sample: sample.Params{Temp: 0}})
	require.NoError(t, err)
	require.Equal(t, []int{1}, res.PromptTokens)
	require.Equal(t, string(want), res.Text)

	steps := readTrace(t)

	sess := m.NewSession(512, nil)
	tok := 1
	for i, st := range steps[:200] {
		require.Equal(t, st.InputToken, tok, "step %d input", i)
		logits, err := sess.Forward([]int{tok}, false)
		require.NoError(t, err)
		top := topK(logits.Data, 5)
		for k, ref := range st.Top5 {
			require.InDelta(t, ref[1], top[k].Logit, 1e-3, "step %d rank %d", i, k)
			// Ranks may swap only where the reference logits are within tolerance.
			if top[k].ID != int(ref[0]) {
				require.InDelta(t, ref[1], logits.Data[int(ref[0])], 1e-3, "step %d rank %d id", i, k)
			}
		}
		tok = st.NextToken
	}
}

// With the KV cache in f16, each step's top-5 logits, fed the reference's
// tokens, stay within what rounding keys and values to f16 moves them.
func TestStories260KCacheF16(t *testing.T) {
	m, err := Load(fixtures.Path(t, "stories260K", "stories260K.gguf"), "")
	require.NoError(t, err)
	defer m.Close()
	m.KVType = ops.F16
	sess := m.NewSession(512, nil)
	var worst float64
	for i, st := range readTrace(t)[:200] {
		logits, err := sess.Forward([]int{st.InputToken}, false)
		require.NoError(t, err)
		for k, ref := range st.Top5 {
			d := math.Abs(ref[1] - float64(logits.Data[int(ref[0])]))
			worst = max(worst, d)
			require.Less(t, d, 0.02, "step %d rank %d", i, k)
		}
	}
	t.Logf("largest top-5 logit difference from llama.cpp's: %.4f", worst)
	require.Error(t, sess.SetKVType(ops.F32), "the caches exist")
	require.Error(t, m.Prog.NewSession(8, nil).SetKVType(ops.Q4_0))
}

type traceStep = fixtures.TraceStep

// readTrace returns the trace's steps (at least 200).
func readTrace(t *testing.T) []traceStep { return fixtures.StoriesTrace(t, 200) }
