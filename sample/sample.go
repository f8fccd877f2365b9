// Package sample picks the next token from logits, as llama.cpp's default
// chain does: repeat penalty, then top-k, top-p and min-p to narrow the
// candidates, then temperature and a seeded draw. Temperature 0 is greedy.
// A logit bias (llama.cpp's logit_bias) comes before all of them.
package sample

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"

	"github.com/pinfer/pinfer/grammar"
)

// Params are the sampling settings, named as llama.cpp's flags.
type Params struct {
	Temp          float64 // 0: greedy
	TopK          int     // 0: off
	TopP          float64 // 1: off
	MinP          float64 // 0: off
	RepeatPenalty float64 // 1: off
	RepeatLastN   int     // how many recent tokens the penalty looks at; 0: none, -1: all
	Seed          uint64
	// Bias is added to the logits of its tokens before anything else, as
	// llama.cpp's logit_bias: -Inf bans a token (its --ignore-eos bans the
	// ends of text so). The log-probabilities a server reports are the
	// model's, without it. nil: none.
	Bias map[int]float64
}

// ParamError names a setting by its llama.cpp server field (top_p, ...)
// and says what it must be.
type ParamError struct {
	Name  string
	Value float64
	Want  string
}

func (e *ParamError) Error() string { return fmt.Sprintf("%s %v: %s", e.Name, e.Value, e.Want) }

// Check refuses settings that have no meaning, rather than have Sample
// quietly read them as something else. The server and the CLI share it.
func (p Params) Check() error {
	for _, c := range []struct {
		name string
		v    float64
		ok   bool
		want string
	}{
		{"temperature", p.Temp, p.Temp >= 0 && !math.IsInf(p.Temp, 0), "want 0 (greedy) or more"},
		{"top_k", float64(p.TopK), p.TopK >= 0, "want 0 (off) or more"},
		{"top_p", p.TopP, p.TopP > 0 && p.TopP <= 1, "want a probability in (0, 1], 1 being off"},
		{"min_p", p.MinP, p.MinP >= 0 && p.MinP <= 1, "want a probability in [0, 1], 0 being off"},
		{"repeat_penalty", p.RepeatPenalty, p.RepeatPenalty > 0 && !math.IsInf(p.RepeatPenalty, 0), "want a positive factor, 1 being off"},
		{"repeat_last_n", float64(p.RepeatLastN), p.RepeatLastN >= -1, "want a count of tokens, 0 for none or -1 for all"},
	} {
		if !c.ok {
			return &ParamError{c.name, c.v, c.want}
		}
	}
	for _, b := range p.Bias {
		if math.IsNaN(b) || math.IsInf(b, 1) {
			return &ParamError{"logit_bias", b, "want a number, or -Inf to ban the token"}
		}
	}
	return nil
}

// Defaults are llama.cpp's defaults.
func Defaults() Params {
	return Params{Temp: 0.8, TopK: 40, TopP: 0.95, MinP: 0.05, RepeatPenalty: 1.0, RepeatLastN: 64}
}

// Sampler keeps the random state and the recent tokens.
type Sampler struct {
	p      Params
	rng    *rand.Rand
	recent []int
	cand   []cand
	gm     *grammar.Matcher
	mask   []bool
}

type cand struct {
	id    int
	logit float64
}

// New makes a sampler seeded with p.Seed.
func New(p Params) *Sampler {
	return &Sampler{p: p, rng: rand.New(rand.NewPCG(p.Seed, p.Seed^0x9e3779b97f4a7c15))}
}

// Accept records a token (prompt or generated) for the repeat penalty.
func (s *Sampler) Accept(id int) {
	if s.p.RepeatLastN == 0 {
		return
	}
	s.recent = append(s.recent, id)
	if n := s.p.RepeatLastN; n > 0 && len(s.recent) > n {
		s.recent = s.recent[len(s.recent)-n:]
	}
}

// SetGrammar has Pick choose only the tokens that m allows next, and move
// m on by the token it picks.
func (s *Sampler) SetGrammar(m *grammar.Matcher) { s.gm = m }

// Pick is Sample under the grammar, if one is set: the tokens it does not
// allow are dropped before anything else but the repeat penalty (so that
// top-k and the rest choose among allowed tokens, and greedy takes the
// best allowed one). It fails when the grammar allows no token.
func (s *Sampler) Pick(logits []float32) (int, error) {
	if s.gm == nil {
		return s.Sample(logits), nil
	}
	if cap(s.mask) < len(logits) {
		s.mask = make([]bool, len(logits))
	}
	s.mask = s.mask[:len(logits)]
	if s.p.Temp <= 0 {
		// Greedy takes the best allowed token: try the best few one by
		// one, which costs a token's walk each, before a mask over the
		// whole vocabulary (13 ms for LLaMA's inside a JSON string).
		for _, x := range topK(s.candidates(logits), min(8, len(logits))) {
			if s.gm.Allows(x.id) {
				return x.id, s.gm.Accept(x.id)
			}
		}
	}
	if s.gm.Allowed(s.mask) == 0 {
		if s.gm.Ambiguous() {
			return 0, grammar.ErrTooAmbiguous
		}
		return 0, errors.New("the grammar allows no token here (it needs a character that no token writes, or the text to end and the vocabulary has no end token)")
	}
	id := s.sample(logits, s.mask)
	return id, s.gm.Accept(id)
}

// Sample picks a token from logits (which it does not change).
func (s *Sampler) Sample(logits []float32) int { return s.sample(logits, nil) }

// candidates are the logits with the bias and the repeat penalty applied,
// in id order (s.cand's buffer).
func (s *Sampler) candidates(logits []float32) []cand {
	c := s.cand[:0]
	for i, l := range logits {
		c = append(c, cand{i, float64(l)})
	}
	s.cand = c
	for id, b := range s.p.Bias {
		if id >= 0 && id < len(c) {
			c[id].logit += b
		}
	}
	if s.p.RepeatPenalty != 1 && s.p.RepeatPenalty > 0 {
		seen := map[int]bool{}
		for _, id := range s.recent {
			if seen[id] || id < 0 || id >= len(c) {
				continue
			}
			seen[id] = true
			// As llama.cpp: shrink a positive logit, grow a negative one.
			if c[id].logit > 0 {
				c[id].logit /= s.p.RepeatPenalty
			} else {
				c[id].logit *= s.p.RepeatPenalty
			}
		}
	}
	return c
}

// sample picks among the tokens mask allows (nil: all).
func (s *Sampler) sample(logits []float32, mask []bool) int {
	c := s.candidates(logits)
	if mask != nil {
		n := 0
		for _, x := range c {
			if mask[x.id] {
				c[n] = x
				n++
			}
		}
		c = c[:n]
	}
	if s.p.Temp <= 0 {
		best := 0
		for i := range c {
			if c[i].logit > c[best].logit {
				best = i
			}
		}
		return c[best].id
	}
	if k := s.p.TopK; k > 0 && k < len(c) {
		c = topK(c, k) // a vocabulary-wide sort costs more than the model here
	} else {
		sort.Slice(c, func(i, j int) bool { return better(c[i], c[j]) })
	}
	probs := softmax(c, 1)
	if p := s.p.TopP; p > 0 && p < 1 {
		var cum float64
		for i, q := range probs {
			cum += q
			if cum >= p {
				c = c[:i+1]
				break
			}
		}
	}
	if m := s.p.MinP; m > 0 {
		// min-p compares probabilities to the best one's: logit - best >= log m.
		limit := c[0].logit + math.Log(m)
		n := 1
		for n < len(c) && c[n].logit >= limit {
			n++
		}
		c = c[:n]
	}
	probs = softmax(c, s.p.Temp)
	r := s.rng.Float64()
	for i, q := range probs {
		r -= q
		if r < 0 {
			return c[i].id
		}
	}
	return c[len(c)-1].id
}

// softmax of the candidates' logits / temp; c is sorted best first.
func softmax(c []cand, temp float64) []float64 {
	p := make([]float64, len(c))
	var sum float64
	for i := range c {
		p[i] = math.Exp((c[i].logit - c[0].logit) / temp)
		sum += p[i]
	}
	for i := range p {
		p[i] /= sum
	}
	return p
}

// better orders candidates: higher logit first, lower id on ties.
func better(a, b cand) bool { return a.logit > b.logit || (a.logit == b.logit && a.id < b.id) }

// topK moves the k best candidates to the front, sorted, in O(n log k):
// a min-heap of the best k seen so far.
func topK(c []cand, k int) []cand {
	h := c[:k]
	down := func(i int) {
		for {
			l, m := 2*i+1, i
			if l < k && better(h[m], h[l]) {
				m = l
			}
			if r := l + 1; r < k && better(h[m], h[r]) {
				m = r
			}
			if m == i {
				return
			}
			h[i], h[m] = h[m], h[i]
			i = m
		}
	}
	for i := k/2 - 1; i >= 0; i-- {
		down(i)
	}
	for _, x := range c[k:] {
		if better(x, h[0]) {
			h[0] = x
			down(0)
		}
	}
	sort.Slice(h, func(i, j int) bool { return better(h[i], h[j]) })
	return h
}
