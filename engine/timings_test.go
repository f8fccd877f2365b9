package engine

import (
	"testing"

	"github.com/pinfer/pinfer/ops"
	"github.com/pinfer/pinfer/sample"
	"github.com/stretchr/testify/require"
)

// The eval figures divide by the forward passes they time: N tokens need
// N-1 after the prompt's (the reference's greedy continuation has no
// end-of-text token), and a single token none, so no speed is claimed.
func TestEvalTimingsCountRuns(t *testing.T) {
	m, err := Load(shakespeareGGUF(t, ops.F32), "")
	require.NoError(t, err)
	defer m.Close()
	ref := loadShakespeareRef(t)
	for _, n := range []int{1, 2, 9} {
		res, err := m.Generate(Options{Prompt: ref.Prompts[0].Text, N: n, Threads: 1, Sample: sample.Params{Temp: 0}})
		require.NoError(t, err)
		require.Equal(t, ref.Prompts[0].GreedyIDs[:n], res.Tokens)
		tm := res.Timings
		require.Equal(t, n, tm.EvalN)
		require.Equal(t, n-1, tm.EvalRuns, "N=%d", n)
		if n == 1 {
			require.Zero(t, tm.EvalPerSecond)
			continue
		}
		require.Greater(t, tm.EvalMs, 0.0)
		require.InDelta(t, tm.EvalMs/float64(n-1), tm.EvalPerToken, 1e-9)
		require.InDelta(t, 1000/tm.EvalPerToken, tm.EvalPerSecond, 1e-9)
	}
}
