package engine

import (
	"fmt"
	"math"
	"strconv"
	"strings"
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

// llama-perplexity's --chunks N scores only the first N chunks (negative:
// all; past the text's chunks: all), still wants two windows of text, and
// prints the running perplexity after each chunk as "[1]x,[2]y," and then a
// newline; its uncertainty is the standard error of the mean NLL carried
// through exp. The figures come from the logits PyTorch recorded for
// "ROMEO:" (see TestPerplexityAgainstPyTorchLogits).
func TestPerplexityChunksAgainstPyTorchLogits(t *testing.T) {
	ref := loadShakespeareRef(t)
	p := ref.Prompts[0]
	require.Equal(t, []int{1, 870, 983}, p.IDs)
	m, err := Load(shakespeareGGUF(t, ops.F32), "")
	require.NoError(t, err)
	defer m.Close()

	next := []int{p.GreedyIDs[0], 500, 7}
	var tokens []int
	var nlls []float64
	for _, x := range next {
		tokens = append(tokens, 1, 870, 983, x)
		nlls = append(nlls, -logSoftmaxAtF64(p.LastLogits, x))
	}
	// want is llama-perplexity's figure over the first n NLLs.
	want := func(n int) (ppl, stderr float64) {
		var s, s2 float64
		for _, v := range nlls[:n] {
			s += v
			s2 += v * v
		}
		mean := s / float64(n)
		ppl = math.Exp(mean)
		return ppl, ppl * math.Sqrt((s2/float64(n)-mean*mean)/float64(n-1))
	}

	for _, c := range []struct{ chunks, n int }{{2, 2}, {3, 3}, {-1, 3}, {-7, 3}, {100, 3}} {
		var log strings.Builder
		r, err := m.ScoreChunks(m.NewSession(4, nil), tokens, c.chunks, false, &log)
		require.NoError(t, err, "chunks %d", c.chunks)
		require.Len(t, r.Windows, c.n, "chunks %d", c.chunks)
		require.Equal(t, c.n, r.Scored)
		ppl, se := want(c.n)
		require.InEpsilon(t, ppl, r.PPL, 1e-3, "chunks %d", c.chunks)
		require.InEpsilon(t, se, r.StdErr, 1e-3, "chunks %d", c.chunks)

		// The progress line: exactly n running figures, then a newline.
		out := log.String()
		require.Regexp(t, `^(\[\d+\]\d+\.\d{4},)+\n$`, out, "chunks %d", c.chunks)
		fields := strings.Split(strings.TrimSuffix(out, ",\n"), ",")
		require.Len(t, fields, c.n)
		for i, f := range fields {
			prefix := fmt.Sprintf("[%d]", i+1)
			require.True(t, strings.HasPrefix(f, prefix), f)
			v, err := strconv.ParseFloat(strings.TrimPrefix(f, prefix), 64)
			require.NoError(t, err)
			running, _ := want(i + 1)
			require.InEpsilon(t, running, v, 1e-3, "running ppl after chunk %d", i+1)
		}
	}

	// --chunks 0 scores nothing; llama-perplexity wants 2*n_ctx tokens
	// whatever --chunks says.
	_, err = m.ScoreChunks(m.NewSession(4, nil), tokens, 0, false, nil)
	require.ErrorContains(t, err, "0 chunks")
	_, err = m.ScoreChunks(m.NewSession(4, nil), tokens[:7], 1, false, nil)
	require.ErrorContains(t, err, "needs at least 8")
}
