package engine

import (
	"fmt"
	"math"

	"github.com/pinfer/pinfer/graph"
	"github.com/pinfer/pinfer/ops"
	"github.com/pinfer/pinfer/predictors"
)

// Speculative decoding with a draft model (llama.cpp's -md): a smaller
// model of the same vocabulary decodes greedily ahead, and the model
// checks its tokens in one pass, as it checks prompt lookup's (Generate).
// The text is the model's own either way; the draft only saves passes.

// DefaultDraftMax and DefaultDraftPMin are llama.cpp's defaults for
// --draft-max and --draft-p-min (common_speculative_params).
const (
	DefaultDraftMax  = 16
	DefaultDraftPMin = 0.75
)

// Draft is a draft model with its own session, kept across Generate calls:
// each proposal runs only what its cache does not already hold of the text.
type Draft struct {
	m    *Model
	sess *graph.Session
	// PMin stops a draft at the first token the draft model gives less
	// than this probability: past it, the model would rarely agree.
	PMin float64
}

// NewDraft readies d to draft for m in sessions of nctx positions. Their
// vocabularies must be the same token for token, or the draft's ids would
// mean other text.
func (m *Model) NewDraft(d *Model, nctx int, pool *ops.Pool, pred predictors.Predictor, pmin float64) (*Draft, error) {
	if err := compatible(m, d); err != nil {
		return nil, err
	}
	if err := d.CheckContext(nctx, 1); err != nil {
		return nil, fmt.Errorf("draft model %s: %v", d.Path, err)
	}
	if math.IsNaN(pmin) || pmin < 0 || pmin > 1 {
		return nil, fmt.Errorf("draft p-min %g: want a probability in [0, 1]", pmin)
	}
	sess := d.NewSession(nctx, pool)
	sess.SetPredictor(pred)
	return &Draft{m: d, sess: sess, PMin: pmin}, nil
}

func compatible(m, d *Model) error {
	if a, b := m.Tok.Size(), d.Tok.Size(); a != b {
		return fmt.Errorf("draft model %s: a vocabulary of %d tokens, where %s has %d: a draft must share the model's vocabulary", d.Path, b, m.Path, a)
	}
	for id := range m.Tok.Size() {
		if a, b := m.Tok.Piece(id), d.Tok.Piece(id); a != b {
			return fmt.Errorf("draft model %s: token %d is %q, where %s has %q: a draft must share the model's vocabulary", d.Path, id, b, m.Path, a)
		}
	}
	if m.Tok.BOS() != d.Tok.BOS() {
		return fmt.Errorf("draft model %s: BOS is token %d, where %s has %d", d.Path, d.Tok.BOS(), m.Path, m.Tok.BOS())
	}
	return nil
}

// A Drafter proposes up to k tokens to follow text (the tokens the model's
// cache holds and the one just picked), which the model then checks in one
// pass: a draft model (Draft) or prompt lookup (Lookup). The server gives
// each slot one.
type Drafter interface {
	Propose(text []int, k int) ([]int, error)
}

// Lookup is prompt lookup as a Drafter (llama.cpp's llama-lookup): the
// tokens that followed the latest earlier occurrence of the text's last
// few. It keeps nothing between calls.
type Lookup struct{}

// Propose is lookupIn over text.
func (Lookup) Propose(text []int, k int) ([]int, error) { return lookupIn(text, k), nil }

// Propose drafts up to k tokens to follow text, the tokens the model's
// cache holds and the one just picked: the draft model's greedy tokens,
// while it is sure enough of them (PMin). The draft's cache keeps what it
// ran; a rejected draft's tokens leave it on the next call, which reuses
// the longest prefix it shares with the text then. Generate and the
// server's slots (one Draft each) draft with it.
func (d *Draft) Propose(text []int, k int) ([]int, error) {
	k = min(k, d.sess.NCtx()-len(text))
	if k <= 0 {
		return nil, nil
	}
	run := text[d.sess.Reuse(text):]
	var out []int
	for {
		logits, err := d.sess.Forward(run, false)
		if err != nil {
			return nil, fmt.Errorf("draft model %s: %w", d.m.Path, err)
		}
		id, p := best(logits.Data)
		if p < d.PMin {
			return out, nil
		}
		if out = append(out, id); len(out) == k {
			return out, nil
		}
		run = []int{id}
	}
}

// DraftLen is the adaptive length of the next draft, as Generate and the
// server keep it: Max at first, halved down to what a draft got right when
// it misses, doubled back up to Max while drafts are all right. A pass of
// nine tokens costs 2.9x one on the 7B q4_0 file dense, 4.1x sparse (2
// threads), so long drafts pay only when they are mostly right.
type DraftLen struct{ Max, K int }

// NewDraftLen starts at max tokens.
func NewDraftLen(max int) DraftLen { return DraftLen{Max: max, K: max} }

// Checked moves the length on after a draft of n tokens, of which the
// model picked the first right (right == n: all of them).
func (l *DraftLen) Checked(n, right int) {
	switch {
	case n == 0:
	case right >= n:
		l.K = min(l.Max, 2*l.K)
	default:
		l.K = max(1, min(l.K/2, right))
	}
}

// best is the likeliest token and its probability under softmax.
func best(logits []float32) (int, float64) {
	id := 0
	for i, l := range logits {
		if l > logits[id] {
			id = i
		}
	}
	var sum float64
	top := float64(logits[id])
	for _, l := range logits {
		sum += math.Exp(float64(l) - top)
	}
	return id, 1 / sum
}
