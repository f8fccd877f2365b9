package server

// Speculative decoding with a draft model (llama-server's -md): each slot
// keeps a session of the draft model (engine.Draft), which decodes greedily
// ahead of the slot's text; the scheduler's step runs the slot's next token
// and the drafted ones in the one batched pass, with every row's logits,
// and the slot's sampler then picks its tokens row by row from the model's
// own logits, taking them through accept as it takes any token, while it
// picks the drafted one. At the first token it picks otherwise, or when
// accept ends the request, the drafted positions past the text leave the
// slot's cache, which then holds exactly the prompt and the text (the next
// request's prompt caching reads it). Each token costs one pick either
// way, in the same order, so the text is the one the slot gives without a
// draft, greedy or sampled for a seed; the draft only saves passes.

import (
	"fmt"

	"github.com/pinfer/pinfer/engine"
	"github.com/pinfer/pinfer/ops"
)

// specParams are a request's speculative settings, llama-server's
// speculative.n_max, speculative.n_min and speculative.p_min: the most
// tokens a draft holds (0: no draft), the fewest worth a pass (a shorter
// draft is not run), and the draft model's probability below which a
// draft stops.
type specParams struct {
	nmax, nmin int
	pmin       float64
}

// speculative reads a request's speculative fields over the server's
// defaults (--draft-max, --draft-p-min; n_min 0), clamped as llama-server
// clamps them: n_max and n_min at least 0, n_min at most n_max. n_max is
// also held to the context, past which no draft fits. Without a draft
// model they change nothing.
func (s *Server) speculative(f *samplingFields) specParams {
	p := specParams{nmax: s.cfg.DraftMax, pmin: s.cfg.DraftPMin}
	if f.SpecNMax != nil {
		p.nmax = *f.SpecNMax
	}
	if f.SpecNMin != nil {
		p.nmin = *f.SpecNMin
	}
	if f.SpecPMin != nil {
		p.pmin = *f.SpecPMin
	}
	p.nmax = min(max(p.nmax, 0), s.nctx)
	p.nmin = min(max(p.nmin, 0), p.nmax)
	return p
}

// newDrafts gives each slot a session of cfg.Draft of the slot's context.
// engine.Model.NewDraft refuses a draft of another vocabulary.
func (s *Server) newDrafts() error {
	switch {
	case s.cfg.Lookup < 0:
		return fmt.Errorf("--lookup %d: want a count of tokens to draft, or 0 for none", s.cfg.Lookup)
	case s.cfg.Lookup > 0 && s.cfg.Draft != nil:
		return fmt.Errorf("--lookup and --model-draft each draft the tokens: use one of them")
	case s.cfg.Lookup > 0:
		// Prompt lookup keeps nothing: one serves every slot.
		s.cfg.DraftMax = s.cfg.Lookup
		for _, sl := range s.slots {
			sl.spec = engine.Lookup{}
		}
		return nil
	case s.cfg.Draft == nil:
		return nil
	}
	if s.cfg.DraftMax < 0 {
		return fmt.Errorf("--draft-max %d: want at least 1 token", s.cfg.DraftMax)
	}
	if s.cfg.DraftMax == 0 {
		s.cfg.DraftMax = engine.DefaultDraftMax
	}
	for _, sl := range s.slots {
		d, err := s.model.NewDraft(s.cfg.Draft, s.nctx, s.pool, s.cfg.DraftPredictor, s.cfg.DraftPMin)
		if err != nil {
			return err
		}
		sl.spec = d
	}
	return nil
}

// propose drafts the tokens to run after the slot's next one: up to its
// adaptive length (engine.DraftLen, at least n_min), what fits the context
// and what max_tokens leaves (the pass's last row gives a token too), or
// none when fewer than n_min would come.
func (s *Server) propose(sl *slot) ([]int, error) {
	sp := sl.job.params.spec
	if sl.spec == nil || sp.nmax == 0 {
		return nil, nil
	}
	room := sl.sess.NCtx() - sl.sess.Pos() - 1
	if mt := sl.job.params.maxTokens; mt > 0 {
		room = min(room, mt-sl.n-1)
	}
	least := max(sp.nmin, 1)
	want := min(max(sl.dlen.K, least), room)
	if want < least {
		return nil, nil
	}
	sl.text = append(append(sl.text[:0], sl.sess.Tokens()...), sl.next)
	d, err := sl.spec.Propose(sl.text, want)
	if err != nil || len(d) < least {
		return nil, err
	}
	return d, nil
}

// pick picks the slot's tokens from its rows of a step's logits, from
// row on: the token after its next one, then while it picks the drafted
// token, the token after that (the sampler takes each in as accept would
// have it, so that the next pick sees it), up to an end of text. Their
// logprob records come with them when the request asks for them. The
// scheduler's workers run it for the slots side by side.
func (s *Server) pick(sl *slot, logits *ops.Tensor, row int) (ids []int, lps []tokenLogprob, err error) {
	p := &sl.job.params
	for j := 0; ; j++ {
		x := logits.Row(row + j)
		id, err := sl.smp.Pick(x)
		if err != nil {
			return ids, lps, err
		}
		ids = append(ids, id)
		if p.logprobs {
			lps = append(lps, logprobOf(x, id, p.topN))
		}
		if s.model.Tok.EndsText(id) {
			return ids, lps, nil
		}
		sl.smp.Accept(id)
		if j == len(sl.drafted) || id != sl.drafted[j] {
			return ids, lps, nil
		}
	}
}

// take accepts the tokens pick gave, in order. While a token is the
// drafted one, its position already holds it (sl.ahead); at the first that
// is not, the rest of the draft leaves the cache before accept takes it,
// and should accept end the request on a drafted token, release drops the
// rest (sl.ahead). A pick that failed ends the request after the tokens
// before it. The draft's length then follows how much of it was right.
func (s *Server) take(sl *slot, ids []int, lps []tokenLogprob, err error) {
	d := sl.drafted
	sl.drafted, sl.ahead = nil, d
	sl.t.DraftN += len(d)
	s.metrics.drafted.Add(int64(len(d)))
	right := 0
	for j, id := range ids {
		if sl.job == nil {
			break // the request ended on an earlier token
		}
		if j < len(d) && id == d[j] && !s.model.Tok.EndsText(id) {
			right++
			sl.t.DraftNAccepted++
			s.metrics.draftAccepted.Add(1)
		} else {
			s.dropAhead(sl)
		}
		if lps != nil {
			sl.lp = lps[j]
		}
		s.accept(sl, id)
		if len(sl.ahead) > 0 {
			sl.ahead = sl.ahead[1:] // the token is the text's now
		}
	}
	if sl.job == nil {
		return
	}
	if err != nil {
		s.release(sl, finishError, err)
		return
	}
	sl.dlen.Checked(len(d), right)
}

// dropAhead drops the drafted positions past the slot's text.
func (s *Server) dropAhead(sl *slot) {
	if n := len(sl.ahead); n > 0 {
		sl.sess.Truncate(sl.sess.Pos() - n)
	}
	sl.ahead = nil
}
