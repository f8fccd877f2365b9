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
	if chunks == 0 {
		return nil, fmt.Errorf("0 chunks scores nothing; want a count, or -1 for all")
	}
	return m.Score(sess, tokens, ScoreOptions{Chunks: chunks, Stepwise: stepwise, Log: log})
}

// ScoreOptions say which windows Score runs and who else sees the
// predictions it scores.
type ScoreOptions struct {
	// Chunks scores only the first Chunks windows (0 or negative: all),
	// llama-perplexity's --chunks.
	Chunks int
	// Stride, when positive, is llama-perplexity's strided perplexity
	// (--ppl-stride, its perplexity_v2) in place of its standard chunks:
	// see Score.
	Stride int
	// Stepwise feeds one token at a time (ScoreSession).
	Stepwise bool
	// Log gets the running perplexity after each window, "[1]x.xxxx,",
	// and a newline at the end.
	Log io.Writer
	// Row, when set, sees every scored prediction in order: window w's
	// logits at its position j (the text's token w.Start+j), which predict
	// the text's token next. The logits live until Row returns.
	Row func(w Window, j int, logits []float32, next int) error
	// Done, when set, is called after each window's predictions were
	// scored, with the running result.
	Done func(w Window, r *Perplexity) error

	// anyLength lifts the two-window minimum: a KL-divergence run's windows
	// are the base file's, however few (llama-perplexity's kl_divergence
	// asks for no more).
	anyLength bool
}

// Score is the one scoring loop behind perplexity, strided perplexity, the
// KL-divergence base file and the KL divergence: it runs the text's tokens
// in windows of sess's context n_ctx and scores the predictions of each
// window's last tokens. The text must hold 2*n_ctx tokens, as
// llama-perplexity asks in both modes.
//
// Standard mode (llama-perplexity's perplexity()): window i runs tokens
// [i*n_ctx, (i+1)*n_ctx) with BOS in place of its first token (when the
// vocabulary adds BOS) and scores its positions j in [n_ctx/2, n_ctx-2],
// i.e. the predictions of tokens i*n_ctx+n_ctx/2+1 ... (i+1)*n_ctx-1;
// there are len(tokens)/n_ctx windows.
//
// Strided mode (opt.Stride = s > 0, llama-perplexity's perplexity_v2):
// window i runs tokens [i*s, i*s+n_ctx) and scores its positions j in
// [n_ctx-s-1, n_ctx-2], the predictions of the s tokens i*s+n_ctx-s ...
// i*s+n_ctx-1, which the window before did not reach; there are
// ceil((len(tokens)-n_ctx)/s) windows, so the last one ends before the
// text does. The windows run as they are in the text: perplexity_v2 writes
// BOS over a window's first token only after llama_decode has run it (and
// puts the token back), so only the first window, which starts at the
// text's own BOS, begins with one. s must be below n_ctx: the first scored
// position, n_ctx-s-1, must exist.
func (m *Model) Score(sess *graph.Session, tokens []int, opt ScoreOptions) (*Perplexity, error) {
	nctx := sess.NCtx()
	if nctx < 4 {
		return nil, fmt.Errorf("a context of %d is too small to score", nctx)
	}
	if opt.Stride < 0 {
		return nil, fmt.Errorf("a stride of %d: want a positive one", opt.Stride)
	}
	if opt.Stride >= nctx {
		return nil, fmt.Errorf("a stride of %d leaves a window of %d no position to score from: want at most %d", opt.Stride, nctx, nctx-1)
	}
	if len(tokens) < 2*nctx && !opt.anyLength {
		return nil, fmt.Errorf("the text has %d tokens; perplexity with a context of %d needs at least %d", len(tokens), nctx, 2*nctx)
	}
	var n, first, step int // windows, first scored position, advance
	if opt.Stride > 0 {
		step, first = opt.Stride, nctx-opt.Stride-1
		n = (len(tokens) - nctx + step - 1) / step
	} else {
		step, first = nctx, nctx/2
		n = len(tokens) / nctx
	}
	if opt.Chunks > 0 && opt.Chunks < n {
		n = opt.Chunks
	}
	if n < 1 {
		return nil, fmt.Errorf("the text has %d tokens, less than one window of %d", len(tokens), nctx)
	}
	bos := opt.Stride == 0 && m.Tok.Vocab().AddBOS
	r := &Perplexity{Tokens: len(tokens)}
	var sum, sumSq float64
	win := make([]int, nctx)
	for i := 0; i < n; i++ {
		start := i * step
		copy(win, tokens[start:start+nctx])
		if bos {
			win[0] = m.Tok.BOS()
		}
		w := Window{Start: start, End: start + nctx, ScoreFrom: start + first, ScoreTo: start + nctx - 1}
		sess.Reset()
		rows, err := windowLogits(sess, win, first, opt.Stepwise)
		if err != nil {
			return nil, err
		}
		var wsum float64
		for j := first; j < nctx-1; j++ {
			next := tokens[start+j+1]
			logits := rows(j)
			nll := -logSoftmaxAt(logits, next)
			wsum += nll
			sum += nll
			sumSq += nll * nll
			r.Scored++
			if opt.Row != nil {
				if err := opt.Row(w, j, logits, next); err != nil {
					return nil, err
				}
			}
		}
		w.PPL = math.Exp(wsum / float64(nctx-1-first))
		r.Windows = append(r.Windows, w)
		r.setPPL(sum, sumSq)
		if opt.Log != nil {
			fmt.Fprintf(opt.Log, "[%d]%.4f,", len(r.Windows), r.PPL)
		}
		if opt.Done != nil {
			if err := opt.Done(w, r); err != nil {
				return nil, err
			}
		}
	}
	if opt.Log != nil {
		fmt.Fprintln(opt.Log)
	}
	return r, nil
}

// setPPL sets the perplexity of the NLLs summed so far and its uncertainty.
func (r *Perplexity) setPPL(sum, sumSq float64) {
	cnt := float64(r.Scored)
	mean := sum / cnt
	r.PPL = math.Exp(mean)
	r.StdErr = 0
	if r.Scored > 1 {
		// llama-perplexity's uncertainty: the standard error of the mean
		// NLL, carried through exp.
		if variance := (sumSq/cnt - mean*mean) * cnt / (cnt - 1); variance > 0 {
			r.StdErr = r.PPL * math.Sqrt(variance/cnt)
		}
	}
}

// windowLogits runs a window and returns the logits of its position j, for
// the scored positions (j >= first). The stepwise rows are copied: each
// step's result lives only until the next.
func windowLogits(sess *graph.Session, win []int, first int, stepwise bool) (func(j int) []float32, error) {
	if !stepwise {
		logits, err := sess.Forward(win, true)
		if err != nil {
			return nil, err
		}
		return logits.Row, nil
	}
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
