package server

import (
	"errors"
	"fmt"
	"time"

	"github.com/pinfer/pinfer/graph"
	"github.com/pinfer/pinfer/sample"
	"github.com/pinfer/pinfer/tokenizer"
)

var errShutdown = errors.New("the server is shutting down")

// slot is one sequence of the batch: a KV cache and the request using it.
type slot struct {
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
	for _, sl := range s.slots {
		if sl.job == nil {
			continue
		}
		if err := sl.job.ctx.Err(); err != nil {
			s.release(sl, finishCancelled, err)
			continue
		}
		if s.cancelAll.Load() {
			s.release(sl, finishCancelled, errShutdown)
			continue
		}
		busy = append(busy, sl)
	}
	return busy
}

// admit moves queued requests into free slots.
func (s *Server) admit() {
	for {
		sl := s.freeSlot(nil)
		if sl == nil {
			return
		}
		j := s.queue.pop()
		if j == nil {
			return
		}
		if j.ctx.Err() != nil {
			j.end(finishCancelled, j.ctx.Err(), 0, timings{})
			continue
		}
		s.prefill(s.freeSlot(j), j)
	}
}

// freeSlot picks the free slot whose cache holds the most of j's prompt,
// if that is more than half of it, else the one least recently used, so
// that each conversation's cache lasts as long as it can: a few shared
// template tokens do not take another conversation's slot. llama-server
// picks by the same rules (--slot-prompt-similarity 0.5).
func (s *Server) freeSlot(j *job) *slot {
	var best *slot
	bestN := -1
	for _, sl := range s.slots {
		if sl.job != nil {
			continue
		}
		n := 0
		if j != nil && j.params.cache {
			if n = sl.sess.Common(j.prompt); 2*n <= len(j.prompt) {
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
	for _, id := range j.prompt {
		sl.smp.Accept(id)
	}
	sl.stream = s.model.Tok.NewStream(j.firstPiece)
	sl.stop = stopper{stops: j.params.stops}
	sl.t = timings{PromptN: len(j.prompt) - cached, CacheN: cached}
	start := time.Now()
	logits, err := s.runner.Forward([]*graph.Session{sl.sess}, [][]int{j.prompt[cached:]}, false)
	if err != nil {
		s.release(sl, finishError, err)
		return
	}
	sl.t.PromptMs = msSince(start)
	s.metrics.promptTokens.Add(int64(len(j.prompt) - cached))
	id := sl.smp.Sample(logits.Data)
	sl.started = time.Now() // eval times the passes after the prompt's, as run does
	s.accept(sl, id)
}

// step feeds every busy slot its last sampled token in one batch and
// samples each slot's next token with its own sampler.
func (s *Server) step(busy []*slot) {
	seqs := make([]*graph.Session, len(busy))
	toks := make([][]int, len(busy))
	for k, sl := range busy {
		seqs[k], toks[k] = sl.sess, []int{sl.next}
	}
	logits, err := s.runner.Forward(seqs, toks, false)
	s.metrics.steps.Add(1)
	s.metrics.stepRows.Add(int64(len(busy)))
	if err != nil {
		for _, sl := range busy {
			s.release(sl, finishError, err)
		}
		return
	}
	// Each slot samples with its own sampler from its own row, so the
	// samplers (a sort over the vocabulary each, when temperature > 0) run
	// on the workers side by side.
	ids := make([]int, len(busy))
	s.pool.Run(len(busy), func(lo, hi int) {
		for k := lo; k < hi; k++ {
			ids[k] = busy[k].smp.Sample(logits.Row(k))
		}
	})
	for k, sl := range busy {
		sl.t.EvalRuns++
		s.accept(sl, ids[k])
	}
}

// accept takes a sampled token as pinfer run does: EOS ends the text, else
// the token is streamed; max_tokens or a full context end it after that.
func (s *Server) accept(sl *slot, id int) {
	j := sl.job
	if s.model.Tok.EndsText(id) { // EOS, or a chat model's end of turn
		text, hit := sl.stop.add(sl.stream.Flush())
		j.emit(text)
		if !hit {
			j.emit(sl.stop.flush())
		}
		s.release(sl, finishStop, nil)
		return
	}
	sl.n++
	s.metrics.predicted.Add(1)
	sl.smp.Accept(id)
	text, hit := sl.stop.add(sl.stream.Add(id))
	j.emit(text)
	if hit {
		s.release(sl, finishStop, nil)
		return
	}
	if sl.n == j.params.maxTokens || sl.sess.Pos() >= sl.sess.NCtx() {
		text, hit := sl.stop.add(sl.stream.Flush())
		j.emit(text)
		if !hit {
			j.emit(sl.stop.flush())
		}
		s.release(sl, finishLength, nil)
		return
	}
	sl.next = id
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
	t.Fill()
	sl.job.end(reason, err, sl.n, t)
	sl.job, sl.started = nil, time.Time{}
	s.metrics.slotsBusy.Add(-1)
}

func (s *Server) cancelQueued() {
	for j := s.queue.pop(); j != nil; j = s.queue.pop() {
		j.end(finishCancelled, errShutdown, 0, timings{})
	}
}
