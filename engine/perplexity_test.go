package engine

import (
	"math"
	"testing"

	"github.com/pinfer/pinfer/ops"
	"github.com/stretchr/testify/require"
)

// Windows of 4 tokens score the prediction made at position 2. With each
// window holding the prompt "ROMEO:" (BOS, 870, 983) and then a next token,
// that prediction comes from the very logits PyTorch recorded for the
// prompt, so the perplexity has an independent reference.
func TestPerplexityAgainstPyTorchLogits(t *testing.T) {
	ref := loadShakespeareRef(t)
	p := ref.Prompts[0]
	require.Equal(t, []int{1, 870, 983}, p.IDs)
	m, err := Load(shakespeareGGUF(t, ops.F32), "")
	require.NoError(t, err)
	defer m.Close()

	next := []int{p.GreedyIDs[0], 500, 7}
	var tokens []int
	var nll float64
	for _, x := range next {
		tokens = append(tokens, 1, 870, 983, x)
		nll -= logSoftmaxAtF64(p.LastLogits, x)
	}
	want := math.Exp(nll / float64(len(next)))

	r, err := m.ScoreTokens(tokens, 4, nil, nil)
	require.NoError(t, err)
	require.Len(t, r.Windows, 3)
	require.Equal(t, Window{Start: 4, End: 8, ScoreFrom: 6, ScoreTo: 7, PPL: r.Windows[1].PPL}, r.Windows[1])
	require.Equal(t, 3, r.Scored)
	require.InEpsilon(t, want, r.PPL, 1e-3)
	require.InEpsilon(t, math.Exp(-logSoftmaxAtF64(p.LastLogits, 500)), r.Windows[1].PPL, 1e-3)

	_, err = m.ScoreTokens(tokens[:7], 4, nil, nil)
	require.ErrorContains(t, err, "needs at least 8")
}

func logSoftmaxAtF64(logits []float32, id int) float64 {
	mx := math.Inf(-1)
	for _, l := range logits {
		mx = math.Max(mx, float64(l))
	}
	var s float64
	for _, l := range logits {
		s += math.Exp(float64(l) - mx)
	}
	return float64(logits[id]) - mx - math.Log(s)
}
