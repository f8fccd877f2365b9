package engine

import (
	"fmt"
	"io"
	"math"

	"github.com/pinfer/pinfer/graph"
	"github.com/pinfer/pinfer/ops"
	"github.com/pinfer/pinfer/predictors"
)

// Perplexity is the result of scoring a text.
type Perplexity struct {
	Windows []Window `json:"windows"`
	PPL     float64  `json:"ppl"`
	StdErr  float64  `json:"ppl_stderr"`
	Tokens  int      `json:"tokens"`
	Scored  int      `json:"scored"`
}

// Window is one context-sized chunk of the text, in token positions.
type Window struct {
	Start, End         int // tokens [Start, End) of the text are run
	ScoreFrom, ScoreTo int // predictions of tokens (ScoreFrom, ScoreTo] are scored
	PPL                float64
}

// ComputePerplexity scores text as llama.cpp's perplexity tool does: the
// tokens (BOS first) are cut into windows of nctx; each window starts with
// BOS in place of its first token, and only the second half of each window is
// scored, so every scored token sees at least nctx/2 tokens of context.
// pred (nil: dense) chooses each sparse FFN's neurons, as in run, so that
// the perplexity is that of the path the predictor gives. The windows run
// as batches: under ReLU-family activations each row still computes only
// its own neurons (ops' gateEach), which predictor eval, one token at a
// time, finds to the same figure.
func (m *Model) ComputePerplexity(text string, nctx int, pred predictors.Predictor, pool *ops.Pool, log io.Writer) (*Perplexity, error) {
	return m.ComputePerplexityChunks(text, nctx, -1, pred, pool, log)
}

// ComputePerplexityChunks is ComputePerplexity scoring only the first
// chunks windows, as llama-perplexity's --chunks does: a negative count,
// or one past the text's windows, scores them all. The text must still
// hold two windows, as llama-perplexity requires whatever --chunks says.
func (m *Model) ComputePerplexityChunks(text string, nctx, chunks int, pred predictors.Predictor, pool *ops.Pool, log io.Writer) (*Perplexity, error) {
	sess := m.NewSession(nctx, pool)
	sess.SetPredictor(pred)
	return m.ScoreChunks(sess, m.Encode(text), chunks, false, log)
}

// ScoreTokens is ComputePerplexity on tokens already encoded, run dense.
func (m *Model) ScoreTokens(tokens []int, nctx int, pool *ops.Pool, log io.Writer) (*Perplexity, error) {
	return m.ScoreSession(m.NewSession(nctx, pool), tokens, false, log)
}

// ScoreSession scores tokens in ScoreTokens's windows of sess's context on
// sess, which may carry a predictor. Stepwise feeds one token at a time, as
// decoding does: a window run as one batch computes the union of its rows'
// neurons, which hides what each row's predictor missed.
func (m *Model) ScoreSession(sess *graph.Session, tokens []int, stepwise bool, log io.Writer) (*Perplexity, error) {
	return m.ScoreChunks(sess, tokens, -1, stepwise, log)
}

// ScoreChunks is ScoreSession on the first chunks windows only (negative:
// all), llama-perplexity's --chunks. A count of 0 scores nothing and is
// refused. log, where not nil, gets llama-perplexity's progress line: the
// running perplexity after each window, "[1]x.xxxx,[2]y.yyyy,", then a
// newline.
func (m *Model) ScoreChunks(sess *graph.Session, tokens []int, chunks int, stepwise bool, log io.Writer) (*Perplexity, error) {
	nctx := sess.NCtx()
	if nctx < 4 {
		return nil, fmt.Errorf("a context of %d is too small to score", nctx)
	}
	if chunks == 0 {
		return nil, fmt.Errorf("0 chunks scores nothing; want a count, or -1 for all")
	}
	if len(tokens) < 2*nctx {
		return nil, fmt.Errorf("the text has %d tokens; perplexity with a context of %d needs at least %d", len(tokens), nctx, 2*nctx)
	}
	n := len(tokens) / nctx
	if chunks > 0 && chunks < n {
		n = chunks
	}
	r := &Perplexity{Tokens: len(tokens)}
	first := nctx / 2
	var sum, sumSq float64
	for i := 0; i < n; i++ {
		start := i * nctx
		win := append([]int(nil), tokens[start:start+nctx]...)
		if m.Tok.Vocab().AddBOS {
			win[0] = m.Tok.BOS()
		}
		sess.Reset()
		rows, err := windowLogits(sess, win, stepwise)
		if err != nil {
			return nil, err
		}
		var wsum float64
		for j := first; j < nctx-1; j++ {
			nll := -logSoftmaxAt(rows(j), tokens[start+j+1])
			wsum += nll
			sum += nll
			sumSq += nll * nll
			r.Scored++
		}
		w := Window{Start: start, End: start + nctx, ScoreFrom: start + first, ScoreTo: start + nctx - 1, PPL: math.Exp(wsum / float64(nctx-1-first))}
		r.Windows = append(r.Windows, w)
		if log != nil {
			fmt.Fprintf(log, "[%d]%.4f,", len(r.Windows), math.Exp(sum/float64(r.Scored)))
		}
	}
	if log != nil {
		fmt.Fprintln(log)
	}
	cnt := float64(r.Scored)
	mean := sum / cnt
	r.PPL = math.Exp(mean)
	if r.Scored > 1 {
		// llama-perplexity's uncertainty: the standard error of the mean
		// NLL, carried through exp.
		if variance := (sumSq/cnt - mean*mean) * cnt / (cnt - 1); variance > 0 {
			r.StdErr = r.PPL * math.Sqrt(variance/cnt)
		}
	}
	return r, nil
}

// windowLogits runs a window and returns the logits of its position j, for
// the scored half (j >= len(win)/2). The stepwise rows are copied: each
// step's result lives only until the next.
func windowLogits(sess *graph.Session, win []int, stepwise bool) (func(j int) []float32, error) {
	if !stepwise {
		logits, err := sess.Forward(win, true)
		if err != nil {
			return nil, err
		}
		return logits.Row, nil
	}
	first := len(win) / 2
	var rows [][]float32
	for j, tok := range win[:len(win)-1] { // the last token predicts nothing scored
		logits, err := sess.Forward([]int{tok}, false)
		if err != nil {
			return nil, err
		}
		if j >= first {
			rows = append(rows, append([]float32(nil), logits.Data...))
		}
	}
	return func(j int) []float32 { return rows[j-first] }, nil
}

func logSoftmaxAt(logits []float32, id int) float64 {
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
