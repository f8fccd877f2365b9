package engine

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/pinfer/pinfer/grammar"
	"github.com/pinfer/pinfer/graph"
	"github.com/pinfer/pinfer/ops"
	"github.com/pinfer/pinfer/predictors"
	"github.com/pinfer/pinfer/sample"
)

// Options for one generation.
type Options struct {
	Prompt    string
	PromptIDs []int // used instead of Prompt when set: ids, BOS included if wanted
	N         int   // tokens to generate; < 0: until EOS or the context is full
	Ctx       int   // context size; 0: the model's, at most 4096
	Threads   int
	Sample    sample.Params
	TopLogits int                  // report the K largest logits at the last prompt position
	OnText    func(string)         // streamed text, as it becomes complete
	OnPrompt  func()               // called once the prompt and context pass their checks, before the prompt's pass
	Predictor predictors.Predictor // chooses sparse FFN neurons; nil: every neuron
	Pool      *ops.Pool            // optional; else one is made for Threads
	// Session, if set, is kept across calls (a conversation's turns): the
	// prompt runs from where it stops sharing the session's cached tokens,
	// and Ctx, Threads and Pool give way to the session's own.
	Session *graph.Session
	// ContextShift lets generation go on past a full context, as
	// llama-cli's context shift: the prompt's first Keep tokens after BOS
	// (all of it when Keep < 0) stay, half of the positions after them are
	// dropped, and the kept tokens run again from the first one dropped.
	ContextShift bool
	Keep         int
	// Lookup drafts up to this many tokens a step by prompt lookup (the
	// tokens that followed the latest earlier occurrence of the text's
	// last few) and runs them with the step's token in one pass; each
	// drafted token the sampler then picks itself saves a pass. The text
	// is the same as without it; for greedy decoding (llama.cpp's
	// llama-lookup). 0: off.
	Lookup int
	// Draft, if set, is a draft model (llama.cpp's -md, speculative
	// decoding): each pass also runs up to DraftMax tokens (0:
	// DefaultDraftMax) it decodes greedily ahead, checked as Lookup's are,
	// so the text is again the same as without it.
	Draft    *Draft
	DraftMax int
	// Grammar, if set, constrains the generated text (llama.cpp's
	// --grammar): only tokens that keep it a prefix of a match are drawn,
	// and an end token only once it matches.
	Grammar *grammar.Grammar
	// AfterPrompt, if set, is called with the session once the prompt's
	// pass is done, before the first token is picked (llama-cli's
	// --prompt-cache saves the session there); an error ends Generate.
	AfterPrompt func(*graph.Session) error
}

// Logit is one entry of a top-logits list.
type Logit struct {
	ID    int     `json:"id"`
	Logit float32 `json:"logit"`
}

// Timings are measured as llama.cpp reports them.
type Timings struct {
	LoadMs float64 `json:"load_ms,omitempty"`
	// CacheN is the prompt's tokens whose positions a session kept from
	// its last one (llama-server's cache_n); PromptN counts the rest.
	CacheN          int     `json:"cache_n"`
	PromptN         int     `json:"prompt_n"`
	PromptMs        float64 `json:"prompt_ms"`
	PromptPerToken  float64 `json:"prompt_per_token_ms"`
	PromptPerSecond float64 `json:"prompt_per_second"`
	EvalN           int     `json:"predicted_n"`
	EvalMs          float64 `json:"predicted_ms"`
	EvalPerToken    float64 `json:"predicted_per_token_ms"`
	EvalPerSecond   float64 `json:"predicted_per_second"`
	// EvalRuns is the forward passes EvalMs times, each with the sampling
	// of its token. The prompt's pass gives the first token and a last
	// token needs none, so after N tokens there are N-1 (N when the text
	// ends at an end-of-text token): the per-token figures divide by them,
	// as llama.cpp's "eval time ... runs" does (the server's divide by the
	// tokens, as llama-server's: Timings.FillBy).
	EvalRuns int `json:"predicted_runs"`
	// DraftN and DraftNAccepted are llama-server's draft_n and
	// draft_n_accepted: the tokens a draft model drafted for a server
	// request and those of them the sampler picked. Both are written when
	// it drafted, neither when not (MarshalJSON), as llama-server's.
	DraftN         int `json:"draft_n,omitempty"`
	DraftNAccepted int `json:"draft_n_accepted,omitempty"`
}

// MarshalJSON writes draft_n_accepted beside a draft_n, even when 0.
func (t Timings) MarshalJSON() ([]byte, error) {
	type plain Timings
	if t.DraftN == 0 {
		return json.Marshal(plain(t))
	}
	return json.Marshal(struct {
		plain
		DraftNAccepted int `json:"draft_n_accepted"`
	}{plain(t), t.DraftNAccepted})
}

// Result of one generation.
type Result struct {
	PromptTokens []int   `json:"prompt_tokens"`
	Tokens       []int   `json:"tokens"`
	Text         string  `json:"text"`
	TopLogits    []Logit `json:"top_logits,omitempty"`
	StopReason   string  `json:"stop_reason"`
	Shifts       int     `json:"context_shifts,omitempty"` // times the context was shifted
	// Drafted and Accepted count the tokens Lookup or Draft drafted and
	// those the sampler picked.
	Drafted    int          `json:"drafted,omitempty"`
	Accepted   int          `json:"accepted,omitempty"`
	Seed       uint64       `json:"seed"` // the sampler's, to run a draw again
	Timings    Timings      `json:"timings"`
	Stats      *SparseStats `json:"stats,omitempty"`
	LastLogits []float32    `json:"-"` // logits at the last prompt position
}

// SparseStats says what the sparse FFNs did during a run.
type SparseStats struct {
	Predictor      string    `json:"predictor"`
	ActiveFraction []float64 `json:"active_fraction"` // per sparse layer, in layer order
	PredictorShare float64   `json:"predictor_time_share"`
}

// Generate runs the prompt and then samples up to opt.N tokens.
func (m *Model) Generate(opt Options) (*Result, error) {
	nctx := m.Context(opt.Ctx)
	res := &Result{PromptTokens: m.Encode(opt.Prompt), Tokens: []int{}, Seed: opt.Sample.Seed}
	if opt.PromptIDs != nil {
		res.PromptTokens = append([]int(nil), opt.PromptIDs...)
		for _, id := range res.PromptTokens {
			if id < 0 || id >= m.Prog.Vocab {
				return nil, fmt.Errorf("prompt id %d is outside the vocabulary of %d", id, m.Prog.Vocab)
			}
		}
	}
	res.Timings.LoadMs = ms(m.LoadTime)
	if len(res.PromptTokens) == 0 {
		res.PromptTokens = []int{m.Tok.BOS()}
	}
	if opt.Session != nil {
		nctx = opt.Session.NCtx()
	}
	if err := m.CheckContext(nctx, 1); err != nil {
		return nil, err
	}
	if len(res.PromptTokens) >= nctx {
		return nil, fmt.Errorf("the prompt has %d tokens but the context is %d (raise -c)", len(res.PromptTokens), nctx)
	}
	if opt.OnPrompt != nil {
		opt.OnPrompt()
	}
	sess, cached := opt.Session, 0
	if sess == nil {
		pool := opt.Pool
		if pool == nil {
			pool = ops.NewPool(opt.Threads)
			defer pool.Close()
		}
		sess = m.NewSession(nctx, pool)
	} else {
		cached = sess.Reuse(res.PromptTokens)
		// Result.Stats are this call's, as a new session's would be, not
		// the kept session's totals over its earlier calls.
		sess.Runner().Stats = graph.NewStats(m.Prog)
	}
	sess.SetPredictor(opt.Predictor)
	smp := sample.New(opt.Sample)
	if opt.Grammar != nil {
		smp.SetGrammar(opt.Grammar.NewMatcher(m.GrammarVocab()))
	}
	for _, id := range res.PromptTokens {
		smp.Accept(id)
	}

	start := time.Now()
	logits, err := sess.Forward(res.PromptTokens[cached:], false)
	if err != nil {
		return nil, err
	}
	res.Timings.PromptN, res.Timings.CacheN = len(res.PromptTokens)-cached, cached
	res.Timings.PromptMs = ms(time.Since(start))
	res.LastLogits = append([]float32(nil), logits.Data...)
	if opt.TopLogits > 0 {
		res.TopLogits = topK(logits.Data, opt.TopLogits)
	}
	if opt.AfterPrompt != nil {
		if err := opt.AfterPrompt(sess); err != nil {
			return nil, err
		}
	}

	// An empty prompt means the text starts with the first generated token,
	// whose leading space SentencePiece drops; under a grammar, which read
	// the space, it stays, so that the text is one the grammar matches.
	stream := m.Tok.NewStream(opt.Prompt == "" && opt.PromptIDs == nil && opt.Grammar == nil)
	text := []byte{}
	emit := func(s string) {
		text = append(text, s...)
		if opt.OnText != nil && s != "" {
			opt.OnText(s)
		}
	}
	res.StopReason = "length"
	var evalStart time.Time
	// last is the logits the next token is picked from. With Lookup:
	// the drafted tokens already run after the last one picked, and the
	// logits after each (rows row i+1 after ahead[i]).
	last := logits.Data
	var ahead []int
	var rows *ops.Tensor
	// dl is the next draft's length (DraftLen): halved down to what the
	// last draft got right, doubled back up to the most while drafts are
	// right.
	maxDraft, propose, err := drafter(opt, res, sess)
	if err != nil {
		return nil, err
	}
	dl, drafted := NewDraftLen(maxDraft), 0
loop:
	for n := 0; opt.N < 0 || n < opt.N; n++ {
		id, err := smp.Pick(last)
		if err != nil {
			return nil, fmt.Errorf("after %d tokens: %w", n, err)
		}
		if n == 0 {
			evalStart = time.Now() // the first token came with the prompt's pass
		}
		if m.Tok.EndsText(id) {
			res.StopReason = "eos"
			break
		}
		res.Tokens = append(res.Tokens, id)
		smp.Accept(id)
		emit(stream.Add(id))
		if len(ahead) > 0 {
			if id == ahead[0] { // drafted right: its pass is done
				res.Accepted++
				ahead = ahead[1:]
				last = rows.Row(rows.Rows - len(ahead) - 1)
				if len(ahead) == 0 {
					dl.Checked(drafted, drafted)
				}
				continue
			}
			// The rest of the draft leaves the cache.
			dl.Checked(drafted, drafted-len(ahead))
			sess.Truncate(sess.Pos() - len(ahead))
			ahead = nil
		}
		full := sess.Pos() >= nctx
		if full && !opt.ContextShift {
			res.StopReason = "context"
			break
		}
		if opt.N >= 0 && n == opt.N-1 {
			break // the last token needs no forward pass
		}
		switch {
		case full:
			rows, err = m.shift(sess, res, opt.Keep, id)
			if errors.Is(err, graph.ErrNoRoom) {
				res.StopReason = "context" // the kept tokens fill it: stop as without a shift
				break loop
			}
		case maxDraft > 0:
			room := nctx - sess.Pos() - 1
			if opt.N >= 0 {
				room = min(room, opt.N-n-2) // the last token needs no pass
			}
			if ahead, err = propose(id, min(dl.K, room)); err != nil {
				return nil, err
			}
			drafted = len(ahead)
			res.Drafted += drafted
			rows, err = sess.Forward(append([]int{id}, ahead...), len(ahead) > 0)
		default:
			rows, err = sess.Forward([]int{id}, false)
		}
		if err != nil {
			return nil, err
		}
		last = rows.Row(0)
		res.Timings.EvalRuns++
	}
	if len(ahead) > 0 {
		// A draft the text did not get to leaves the cache, which then
		// holds the text's tokens only (a kept session's next call).
		sess.Truncate(sess.Pos() - len(ahead))
	}
	emit(stream.Flush())
	res.Text = string(text)
	res.Timings.EvalN = len(res.Tokens)
	if !evalStart.IsZero() {
		res.Timings.EvalMs = ms(time.Since(evalStart))
	}
	res.Timings.Fill()
	res.Stats = m.sparseStats(sess.Runner(), opt.Predictor)
	return res, nil
}

// drafter is what proposes the tokens a pass checks after the one picked:
// prompt lookup (Options.Lookup) or a draft model (Options.Draft), and the
// most a draft may hold; 0 and nil for neither.
func drafter(opt Options, res *Result, sess *graph.Session) (int, func(id, k int) ([]int, error), error) {
	switch {
	case opt.Lookup > 0 && opt.Draft != nil:
		return 0, nil, errors.New("prompt lookup and a draft model each draft the tokens: use one of them")
	case opt.Lookup > 0:
		var text []int // reused from token to token
		return opt.Lookup, func(_, k int) ([]int, error) {
			text = append(append(text[:0], res.PromptTokens...), res.Tokens...)
			return lookupIn(text, k), nil
		}, nil
	case opt.Draft != nil:
		var text []int
		return cmp.Or(opt.DraftMax, DefaultDraftMax), func(id, k int) ([]int, error) {
			text = append(append(text[:0], sess.Tokens()...), id)
			return opt.Draft.Propose(text, k)
		}, nil
	}
	return 0, nil, nil
}

// lookupIn looks for the text's last lookupNgram tokens earlier in it,
// then for fewer, down to lookupMin: a single token's last occurrence says
// little of what follows it.
const lookupNgram, lookupMin = 3, 2

// lookupIn proposes up to k tokens to follow text: the tokens after the
// latest earlier occurrence of its last lookupNgram tokens, or failing
// that of two. Repetitive text (code, lists, a document quoted back)
// drafts far; other text little or nothing.
func lookupIn(text []int, k int) []int {
	if k <= 0 {
		return nil
	}
	for n := min(lookupNgram, len(text)-1); n >= lookupMin; n-- {
		tail := text[len(text)-n:]
		for i := len(text) - n - 1; i >= 0; i-- {
			if slices.Equal(text[i:i+n], tail) {
				next := text[i+n:]
				return append([]int(nil), next[:min(k, len(next))]...)
			}
		}
	}
	return nil
}

// Shift makes room in a full session that began with prompt, as a
// context shift does: BOS and the first keep prompt tokens after it stay
// (all of them when keep < 0), half of the positions after them go
// (graph.Session.Shift), and it returns the tokens to run again. run and
// the server share it.
func (m *Model) Shift(sess *graph.Session, prompt []int, keep int) ([]int, error) {
	bos := 0
	if len(prompt) > 0 && prompt[0] == m.Tok.BOS() {
		bos = 1
	}
	if keep < 0 || keep > len(prompt)-bos {
		keep = len(prompt) - bos
	}
	return sess.Shift(bos + keep)
}

// shift makes room for token id (Shift) and runs the kept tokens with id
// after them.
func (m *Model) shift(sess *graph.Session, res *Result, keep, id int) (*ops.Tensor, error) {
	run, err := m.Shift(sess, res.PromptTokens, keep)
	if err != nil {
		return nil, err
	}
	res.Shifts++
	return sess.Forward(append(run, id), false)
}

// Fill derives the per-token and per-second figures from the counts and
// times, eval's over its runs, as llama.cpp's "eval time ... runs" does.
func (t *Timings) Fill() { t.FillBy(t.EvalRuns) }

// FillBy is Fill with eval's figures over n (llama-server divides by the
// tokens it decoded, not by the passes; 0: none).
func (t *Timings) FillBy(n int) {
	if t.PromptN > 0 && t.PromptMs > 0 {
		t.PromptPerToken = t.PromptMs / float64(t.PromptN)
		t.PromptPerSecond = 1000 / t.PromptPerToken
	}
	if n > 0 && t.EvalMs > 0 {
		t.EvalPerToken = t.EvalMs / float64(n)
		t.EvalPerSecond = 1000 / t.EvalPerToken
	}
}

func ms(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }

func topK(logits []float32, k int) []Logit {
	idx := make([]int, len(logits))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return logits[idx[a]] > logits[idx[b]] })
	k = min(k, len(idx))
	out := make([]Logit, k)
	for i := range out {
		out[i] = Logit{idx[i], logits[idx[i]]}
	}
	return out
}

func (m *Model) sparseStats(r *graph.Runner, p predictors.Predictor) *SparseStats {
	if len(m.Prog.Layers) == 0 {
		return nil
	}
	st := &SparseStats{Predictor: "dense"}
	if p != nil {
		st.Predictor = p.Name()
	}
	for k := range m.Prog.Layers {
		st.ActiveFraction = append(st.ActiveFraction, r.Stats.ActiveFraction(m.Prog, k))
	}
	if r.Stats.Total > 0 {
		st.PredictorShare = r.Stats.Predict.Seconds() / r.Stats.Total.Seconds()
	}
	return st
}
