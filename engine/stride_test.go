package engine

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/pinfer/pinfer/ops"
	"github.com/stretchr/testify/require"
)

// Strided perplexity against llama-perplexity's perplexity_v2
// (tools/perplexity/perplexity.cpp), for n tokens, a window n_ctx and a
// stride s:
//
//	n_chunk_max = (n - n_ctx + s - 1) / s
//	chunk i: start = i*s, end = start + n_ctx; the batch is
//	         tokens[start, end), positions 0.. (BOS is written over
//	         tokens[start] only after llama_decode, and put back)
//	scored:  for j = n_ctx - s - 1; j < n_ctx - 1: -log softmax(logits[j])[tokens[start+j+1]]
//	printed: "[%d]%.4lf," of exp(nll/count) after each chunk
//
// The ranges below are those numbers worked out by hand for n = 203,
// n_ctx = 40, s = 15: n_chunk_max = (203-40+14)/15 = 11, the last chunk
// runs [150, 190) and scores tokens 175..189 (the text's last 13 tokens are
// never scored). The perplexity is computed here in float64 from each
// window's logits, the window run on a fresh session with its own tokens.
func TestStridedPerplexityAgainstHand(t *testing.T) {
	m, err := Load(shakespeareGGUF(t, ops.F32), "")
	require.NoError(t, err)
	defer m.Close()
	ids := heldoutIDs(t, m, 203)
	require.Equal(t, m.Tok.BOS(), ids[0])
	const nctx, stride = 40, 15

	type scored struct{ window, j, next int }
	var seen []scored
	var log strings.Builder
	r, err := m.Score(m.NewSession(nctx, nil), ids, ScoreOptions{Stride: stride, Log: &log,
		Row: func(w Window, j int, logits []float32, next int) error {
			require.Len(t, logits, 1024)
			seen = append(seen, scored{w.Start, j, next})
			return nil
		}})
	require.NoError(t, err)
	require.Len(t, r.Windows, 11)
	for i, w := range r.Windows {
		require.Equal(t, Window{Start: 15 * i, End: 15*i + 40, ScoreFrom: 15*i + 24, ScoreTo: 15*i + 39, PPL: w.PPL}, w, "window %d", i)
	}
	require.Equal(t, Window{Start: 150, End: 190, ScoreFrom: 174, ScoreTo: 189, PPL: r.Windows[10].PPL}, r.Windows[10])
	require.Equal(t, 11*15, r.Scored)
	require.Len(t, seen, 11*15)
	for k, s := range seen {
		i, o := k/15, k%15
		require.Equal(t, scored{15 * i, 24 + o, ids[15*i+24+o+1]}, s, "prediction %d", k)
	}

	// By hand: each window as the text has it, and the same with BOS
	// written over its first token (what perplexity_v2 does not feed).
	var nll, nllBOS float64
	var running []float64
	for i := range 11 {
		start := 15 * i
		for _, bos := range []bool{false, true} {
			win := slices.Clone(ids[start : start+nctx])
			if bos {
				win[0] = m.Tok.BOS()
			}
			logits, err := m.NewSession(nctx, nil).Forward(win, true)
			require.NoError(t, err)
			for j := nctx - stride - 1; j < nctx-1; j++ {
				v := -logSoftmaxAtF64(logits.Row(j), ids[start+j+1])
				if bos {
					nllBOS += v
				} else {
					nll += v
				}
			}
		}
		running = append(running, math.Exp(nll/float64(15*(i+1))))
	}
	want := math.Exp(nll / 165)
	require.InEpsilon(t, want, r.PPL, 1e-9)
	// The BOS question matters on this model, so the figure above tells.
	require.Greater(t, math.Abs(math.Exp(nllBOS/165)-want)/want, 1e-3)

	// The progress line: "[1]x,...,[11]y," and a newline, the running
	// figures printed with %.4f.
	out := log.String()
	require.True(t, strings.HasSuffix(out, ",\n"), out)
	fields := strings.Split(strings.TrimSuffix(out, ",\n"), ",")
	require.Len(t, fields, 11)
	for i, f := range fields {
		require.Equal(t, fmt.Sprintf("[%d]%.4f", i+1, running[i]), f)
	}

	// --chunks 4: the first four windows.
	r4, err := m.Score(m.NewSession(nctx, nil), ids, ScoreOptions{Stride: stride, Chunks: 4})
	require.NoError(t, err)
	require.Equal(t, r.Windows[:4], r4.Windows)
	require.InEpsilon(t, running[3], r4.PPL, 1e-9)

	// The stride must leave a position to score from, and be positive; the
	// text must hold two windows, as in the standard mode.
	_, err = m.Score(m.NewSession(nctx, nil), ids, ScoreOptions{Stride: nctx})
	require.ErrorContains(t, err, "want at most 39")
	r39, err := m.Score(m.NewSession(nctx, nil), ids, ScoreOptions{Stride: nctx - 1})
	require.NoError(t, err)
	require.Equal(t, 0, r39.Windows[0].ScoreFrom) // every position of a window
	_, err = m.Score(m.NewSession(nctx, nil), ids, ScoreOptions{Stride: -2})
	require.ErrorContains(t, err, "stride of -2")
	_, err = m.Score(m.NewSession(nctx, nil), ids[:79], ScoreOptions{Stride: stride})
	require.ErrorContains(t, err, "needs at least 80")
}

// With a stride of n_ctx/2-1 a strided window scores the standard chunk's
// positions n_ctx/2 ... n_ctx-2, and the first window of both modes is the
// text's first n_ctx tokens (BOS already first): their first chunks agree to
// the bit. The later ones do not: the standard chunks start n_ctx apart,
// with BOS written over their first token.
func TestStrideIdentityWithStandardChunk(t *testing.T) {
	m, err := Load(shakespeareGGUF(t, ops.F32), "")
	require.NoError(t, err)
	defer m.Close()
	const nctx = 48
	ids := heldoutIDs(t, m, 4*nctx)
	std, err := m.Score(m.NewSession(nctx, nil), ids, ScoreOptions{Chunks: 1})
	require.NoError(t, err)
	str, err := m.Score(m.NewSession(nctx, nil), ids, ScoreOptions{Chunks: 1, Stride: nctx/2 - 1})
	require.NoError(t, err)
	require.Equal(t, std.Windows, str.Windows)
	require.Equal(t, std.Scored, str.Scored)
	require.Equal(t, std.PPL, str.PPL)

	std, err = m.Score(m.NewSession(nctx, nil), ids, ScoreOptions{})
	require.NoError(t, err)
	str, err = m.Score(m.NewSession(nctx, nil), ids, ScoreOptions{Stride: nctx/2 - 1})
	require.NoError(t, err)
	require.NotEqual(t, std.PPL, str.PPL)
}
