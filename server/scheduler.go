package server

import (
	"cmp"
	"errors"
	"fmt"
	"time"

	"github.com/pinfer/pinfer/engine"
	"github.com/pinfer/pinfer/graph"
	"github.com/pinfer/pinfer/ops"
	"github.com/pinfer/pinfer/sample"
	"github.com/pinfer/pinfer/tokenizer"
)

var errShutdown = errors.New("the server is shutting down")

// slot is one sequence of the batch: a KV cache and the request using it.
type slot struct {
	id      int // its index, the id_slot of llama-server's API
	sess    *graph.Session
	job     *job
	smp     *sample.Sampler
	stream  *tokenizer.Stream
	stop    stopper
	next    int // the sampled token to feed at the next step
	n       int // tokens generated
	used    int // when its last request came: the least recent is reused first
	t       timings
	started time.Time // of generation, after the prompt

	// With logprobs: the record of the token being accepted, and those
	// whose text has not all been sent yet; decoded and sent count the
	// bytes the tokenizer stream gave and those the stop check let out.
	lp            tokenLogprob
	pend          []tokenLogprob
	decoded, sent int

	// With a draft model (speculative.go): its session, the adaptive
	// length of the next draft, the draft that the step runs after next,
	// and while the step takes its tokens, the drafted ones whose
	// positions the cache holds past the text.
	spec    engine.Drafter // a draft model's session, or prompt lookup; nil: none
	dlen    engine.DraftLen
	drafted []int
	ahead   []int
	text    []int // what the draft follows, kept to reuse its memory
}

// loop is the scheduler: the one goroutine that runs the model. Each turn it
// admits queued requests into free slots (prefilling each prompt alone),
// then runs one decode step for all busy slots together.
func (s *Server) loop() {
	defer close(s.loopDone)
	for {
		s.admit()
		busy := s.busySlots()
		if len(busy) == 0 {
			select {
			case <-s.queue.wake:
				continue
			case <-s.quit:
				s.cancelQueued()
				return
			}
		}
		select {
		case <-s.quit:
			for _, sl := range busy {
				s.release(sl, finishCancelled, errShutdown)
			}
			s.cancelQueued()
			return
		default:
		}
		s.step(busy)
	}
}

func (s *Server) busySlots() []*slot {
	var busy []*slot
	freed := false
	for _, sl := range s.slots {
		if sl.job == nil {
			continue
		}
		if err := sl.job.ctx.Err(); err != nil {
			s.release(sl, finishCancelled, err)
			freed = true
			continue
		}
		if s.cancelAll.Load() {
			s.release(sl, finishCancelled, errShutdown)
			freed = true
			continue
		}
		busy = append(busy, sl)
	}
	if freed {
		// The requests waiting for a slot (queued, or deferred for this
		// one) start at the next admit: the loop must not wait for a new
		// request to wake it.
		s.queue.poke()
	}
	return busy
}

// admit moves queued requests into free slots. An embedding request needs
// no slot (runEmbed): it runs when it reaches the head of the queue, even
// with every slot busy, between two decode steps. A request for a slot
// that is busy (a slot action, or id_slot) waits aside, as llama-server
// defers it, and the queue goes on behind it.
func (s *Server) admit() {
	// Those waiting aside go first, now that their slot may be free.
	waiting := s.deferred[:0]
	for _, j := range s.deferred {
		if j.ctx.Err() != nil {
			j.end(finishCancelled, j.ctx.Err(), 0, timings{})
		} else if !s.start(j) {
			waiting = append(waiting, j)
		}
	}
	clear(s.deferred[len(waiting):])
	s.deferred = waiting
	for {
		free := s.freeSlot(nil) != nil
		j := s.queue.popIf(func(j *job) bool { return free || j.embed != nil || j.slotOp != nil || j.pin >= 0 })
		if j == nil {
			return
		}
		if j.ctx.Err() != nil {
			j.end(finishCancelled, j.ctx.Err(), 0, timings{})
			continue
		}
		if j.embed != nil {
			s.runEmbed(j)
			continue
		}
		if !s.start(j) {
			s.deferred = append(s.deferred, j) // its slot is generating
		}
	}
}

// start runs a slot action, or prefills a request in a free slot (its
// pinned one, if any); false when that slot is busy.
func (s *Server) start(j *job) bool {
	if j.slotOp != nil {
		return s.runSlotAction(j)
	}
	sl := s.freeSlot(j)
	if sl == nil {
		return false
	}
	s.prefill(sl, j)
	return true
}

// freeSlot picks the free slot whose cache holds the most of j's prompt,
// if that is more than half of what the slot holds (its conversation goes
// on), else the one least recently used, so that each conversation's cache
// lasts as long as it can: a shared system prompt does not take another
// conversation's slot. llama-server picks by the same rules
// (--slot-prompt-similarity 0.5).
func (s *Server) freeSlot(j *job) *slot {
	if j != nil && j.pin >= 0 {
		if sl := s.slots[j.pin]; sl.job == nil {
			return sl
		}
		return nil
	}
	var best *slot
	bestN := -1
	for _, sl := range s.slots {
		if sl.job != nil {
			continue
		}
		n := 0
		if j != nil && j.params.cache {
			if n = sl.sess.Common(j.prompt); 2*n <= sl.sess.Pos() {
				n = 0
			}
		}
		if n > bestN || n == bestN && sl.used < best.used {
			best, bestN = sl, n
		}
	}
	return best
}

func (s *Server) prefill(sl *slot, j *job) {
	sl.job, sl.n = j, 0
	j.mu.Lock()
	j.slot = sl.id
	j.mu.Unlock()
	sl.pend, sl.decoded, sl.sent = sl.pend[:0], 0, 0
	s.requests++
	sl.used = s.requests
	s.metrics.slotsBusy.Add(1)
	cached := 0
	if j.params.cache {
		cached = sl.sess.Reuse(j.prompt)
	} else {
		sl.sess.Reset()
	}
	sl.smp = sample.New(j.params.sample)
	if g := j.params.grammar; g != nil {
		sl.smp.SetGrammar(g.NewMatcher(s.model.GrammarVocab()))
	}
	for _, id := range j.prompt {
		sl.smp.Accept(id)
	}
	sl.dlen = engine.NewDraftLen(j.params.spec.nmax)
	if d, ok := sl.spec.(*engine.Draft); ok {
		d.PMin = j.params.spec.pmin
	}
	// A grammar read the first piece's space: the text keeps it (engine).
	sl.stream = s.model.Tok.NewStream(j.firstPiece && j.params.grammar == nil)
	sl.stop = stopper{stops: j.params.stops}
	sl.t = timings{PromptN: len(j.prompt) - cached, CacheN: cached}
	start := time.Now()
	// Scoring the prompt needs every position's logits (and no cache:
	// outputs turned it off).
	all := j.params.promptLogprobs()
	logits, err := s.runner.Forward([]*graph.Session{sl.sess}, [][]int{j.prompt[cached:]}, all)
	if err != nil {
		s.release(sl, finishError, err)
		return
	}
	sl.t.PromptMs = msSince(start)
	s.metrics.promptTokens.Add(int64(len(j.prompt) - cached))
	last := logits.Data
	if all {
		last = logits.Row(logits.Rows - 1)
	}
	if j.params.echo {
		var lps []tokenLogprob
		if all {
			lps = s.promptLogprobs(j, logits)
		}
		j.emit(j.promptText, lps)
	}
	if j.params.maxTokens == 0 { // echo alone: the prompt scored, nothing generated
		s.release(sl, finishLength, nil)
		return
	}
	id, err := sl.smp.Pick(last)
	if err != nil {
		s.release(sl, finishError, err)
		return
	}
	if j.params.logprobs {
		sl.lp = logprobOf(last, id, j.params.topN)
	}
	if !s.model.Tok.EndsText(id) {
		sl.smp.Accept(id)
	}
	sl.started = time.Now() // eval times the passes after the prompt's, as run does
	s.accept(sl, id)
}

// promptLogprobs scores the prompt from its positions' logits (a row per
// prompt token): each token after the first by the row before it, on the
// workers side by side.
func (s *Server) promptLogprobs(j *job, logits *ops.Tensor) []tokenLogprob {
	lps := make([]tokenLogprob, len(j.prompt))
	s.pool.Run(len(j.prompt)-1, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			lps[i+1] = logprobOf(logits.Row(i), j.prompt[i+1], j.params.topN)
		}
	})
	lps[0].none = true
	// Offsets index the prompt decoded as a whole (tokenizer.Decode).
	st := s.model.Tok.NewStream(true)
	off := 0
	for i, id := range j.prompt {
		lps[i].id, lps[i].prompt, lps[i].off = id, true, off
		off += len(st.Add(id))
	}
	if j.bosAdded {
		// The echo is the prompt's own tokens, as OpenAI's (which has no
		// BOS) and llama-cpp-python's (which drops a leading BOS): a client
		// that tokenized the text itself, as lm-evaluation-harness does to
		// slice token_logprobs[ctxlen:-1], finds token i of its text at
		// index i. The first is null, as OpenAI's first token always is.
		lps = lps[1:]
		if len(lps) > 0 {
			lps[0] = tokenLogprob{id: lps[0].id, none: true, prompt: true, off: lps[0].off}
		}
	}
	return lps
}

// step feeds every busy slot its last sampled token in one batch and
// samples each slot's next token with its own sampler. A slot with a draft
// model (speculative.go) also feeds the tokens it drafts after it, and
// takes from its rows every token its sampler picks as drafted, and the
// one after them.
func (s *Server) step(busy []*slot) {
	live := busy[:0]
	for _, sl := range busy {
		d, err := s.propose(sl)
		if err != nil {
			s.release(sl, finishError, err)
			continue
		}
		sl.drafted = d
		live = append(live, sl)
	}
	if len(live) == 0 {
		return
	}
	// Each slot's rows of the logits: its tokens' when any slot drafted
	// (all), else its last one's, one a slot.
	seqs := make([]*graph.Session, len(live))
	toks := make([][]int, len(live))
	rows := make([]int, len(live))
	r := 0
	for k, sl := range live {
		seqs[k], toks[k], rows[k] = sl.sess, append([]int{sl.next}, sl.drafted...), r
		r += len(toks[k])
	}
	all := r > len(live)
	logits, err := s.runner.Forward(seqs, toks, all)
	s.metrics.steps.Add(1)
	s.metrics.stepRows.Add(int64(len(live)))
	if err != nil {
		for _, sl := range live {
			s.release(sl, finishError, err) // which drops sl.drafted
		}
		return
	}
	// Each slot samples with its own sampler from its own rows, so the
	// samplers (a sort over the vocabulary each, when temperature > 0) run
	// on the workers side by side.
	ids := make([][]int, len(live))
	lps := make([][]tokenLogprob, len(live))
	errs := make([]error, len(live))
	s.pool.Run(len(live), func(lo, hi int) {
		for k := lo; k < hi; k++ {
			ids[k], lps[k], errs[k] = s.pick(live[k], logits, rows[k])
		}
	})
	for k, sl := range live {
		if len(ids[k]) > 0 {
			sl.t.EvalRuns++
		}
		s.take(sl, ids[k], lps[k], errs[k])
	}
}

// accept takes a sampled token as pinfer run does: EOS ends the text, else
// the token is streamed; max_tokens or a full context end it after that.
// The sampler has taken it in already (pick).
func (s *Server) accept(sl *slot, id int) {
	j := sl.job
	if s.model.Tok.EndsText(id) { // EOS, or a chat model's end of turn
		s.record(sl, "")
		s.end(sl, finishStop)
		return
	}
	sl.n++
	s.metrics.predicted.Add(1)
	piece := sl.stream.Add(id)
	s.record(sl, piece)
	if s.send(sl, piece) {
		s.release(sl, finishStop, nil)
		return
	}
	if sl.n == j.params.maxTokens {
		s.end(sl, finishLength)
		return
	}
	// The drafted positions past the text (speculative.go) are not its.
	if sl.sess.Pos()-len(sl.ahead) >= sl.sess.NCtx() {
		// Only a request that asked for more tokens than fit shifts: one
		// that set none stops at a full context, as without the flag.
		if !s.cfg.ContextShift || j.params.maxName == "" {
			s.end(sl, finishLength)
			return
		}
		if err := s.shift(sl); errors.Is(err, graph.ErrNoRoom) {
			s.end(sl, finishLength) // the kept tokens fill it: stop as without a shift
			return
		} else if err != nil {
			s.release(sl, finishError, err)
			return
		}
	}
	sl.next = id
}

// shift makes room in a full slot (Config.ContextShift), keeping its
// prompt's first n_keep tokens (engine.Model.Shift), and runs the kept
// tokens after the first dropped one again.
func (s *Server) shift(sl *slot) error {
	run, err := s.model.Shift(sl.sess, sl.job.prompt, sl.job.params.keep)
	if err != nil {
		return err
	}
	_, err = s.runner.Forward([]*graph.Session{sl.sess}, [][]int{run}, false)
	return err
}

// record keeps the logprobs of the token just accepted, whose decoding
// added piece, until its text is sent.
func (s *Server) record(sl *slot, piece string) {
	if !sl.job.params.logprobs {
		return
	}
	t := sl.lp
	t.off = sl.decoded
	sl.decoded += len(piece)
	t.end = sl.decoded
	sl.pend = append(sl.pend, t)
}

// send passes decoded text through the stop check and emits what may go
// out, with the records of the tokens whose text it completes; true when it
// hit a stop string. The tokens cut off with a stop string are dropped with
// it: a token is reported when some of its text is in the answer.
func (s *Server) send(sl *slot, decoded string) (hit bool) {
	text, hit := sl.stop.add(decoded)
	s.out(sl, text, hit)
	return hit
}

func (s *Server) out(sl *slot, text string, cut bool) {
	sl.sent += len(text)
	k := 0
	for k < len(sl.pend) && (sl.pend[k].end <= sl.sent || cut && sl.pend[k].off < sl.sent) {
		k++
	}
	var ready []tokenLogprob
	if k > 0 {
		ready = append(ready, sl.pend[:k]...)
	}
	sl.pend = append(sl.pend[:0], sl.pend[k:]...)
	if cut {
		sl.pend = sl.pend[:0]
	}
	sl.job.emit(text, ready)
}

// end flushes the text held back (an unfinished character, the start of a
// stop string that did not come) and releases the slot.
func (s *Server) end(sl *slot, reason string) {
	rest := sl.stream.Flush()
	sl.decoded += len(rest)
	if !s.send(sl, rest) {
		// Everything is out now (sent reaches decoded): so are the records left.
		s.out(sl, sl.stop.flush(), false)
	}
	s.release(sl, reason, nil)
}

// release ends the slot's request and frees the slot.
func (s *Server) release(sl *slot, reason string, err error) {
	if reason == finishError && err != nil {
		err = fmt.Errorf("generation failed: %v", err)
	}
	t := sl.t
	t.EvalN = sl.n
	if !sl.started.IsZero() {
		t.EvalMs = msSince(sl.started)
	}
	// llama-server's speeds divide by the tokens (its n_decoded), not by the
	// passes as run's do: with a draft, a pass gives several. A request
	// whose first pick ended it has none, and keeps run's figure.
	t.FillBy(cmp.Or(t.EvalN, t.EvalRuns))
	// A draft's positions past the text leave the cache, which then holds
	// the prompt and the text only (the next request's prompt cache).
	s.dropAhead(sl)
	sl.drafted = nil
	sl.job.end(reason, err, sl.n, t)
	sl.job, sl.started = nil, time.Time{}
	s.metrics.slotsBusy.Add(-1)
}

func (s *Server) cancelQueued() {
	for j := s.queue.pop(); j != nil; j = s.queue.pop() {
		j.end(finishCancelled, errShutdown, 0, timings{})
	}
}
