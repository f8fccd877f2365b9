package server

import (
	"context"
	"sync"
	"time"
)

// Finish reasons as OpenAI names them, plus the internal ones for a request
// that ended without an answer.
const (
	finishStop      = "stop"
	finishLength    = "length"
	finishCancelled = "cancelled" // the client left or the server is shutting down
	finishError     = "error"
)

// job is one generation request from the moment it is queued. The scheduler
// writes its results; the handler reads them. The outbox never blocks the
// scheduler, however slowly a client reads.
type job struct {
	ctx        context.Context // the request's: done when the client leaves
	prompt     []int
	firstPiece bool // the output begins the text: drop its dummy-prefix space
	params     genParams
	// promptText is the prompt as the client sent it (decoded when sent as
	// ids): what echo prepends, and where text_offset counts from.
	promptText string
	// bosAdded: prompt[0] is the BOS the server put before a text prompt,
	// not a token the client sent, and echo leaves it out (logprobs.go).
	bosAdded bool
	// embed, when set, makes this an embedding request (embed.go): the
	// scheduler runs it without a slot.
	embed *embedWork
	// slotOp, when set, makes this a slot action (slots.go), run by the
	// scheduler once its slot is free.
	slotOp *slotWork
	// pin is the slot a request asked for (llama-server's id_slot), which
	// it waits for; -1: any.
	pin int

	mu      sync.Mutex
	pieces  []string
	lps     [][]tokenLogprob // each piece's tokens, when logprobs are asked for
	finish  string
	err     error
	tokens  int // generated, EOS excluded
	slot    int // the slot that runs it (id_slot in answers); -1 before
	timings timings
	notify  chan struct{}   // one pending wake-up for the handler
	stopped <-chan struct{} // closed when the scheduler has exited
}

func newJob(ctx context.Context, prompt []int, first bool, g genParams) *job {
	return &job{ctx: ctx, prompt: prompt, firstPiece: first, params: g, pin: -1, slot: -1, notify: make(chan struct{}, 1)}
}

// slotID is the slot that runs the job, once the scheduler gave it one.
func (j *job) slotID() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.slot
}

func (j *job) wake() {
	select {
	case j.notify <- struct{}{}:
	default:
	}
}

// emit hands generated text to the handler, with the records of the
// tokens whose text it completes.
func (j *job) emit(text string, lps []tokenLogprob) {
	if text == "" && len(lps) == 0 {
		return
	}
	j.mu.Lock()
	j.pieces = append(j.pieces, text)
	j.lps = append(j.lps, lps)
	j.mu.Unlock()
	j.wake()
}

// end records how the request finished; the first call wins.
func (j *job) end(reason string, err error, tokens int, t timings) {
	j.mu.Lock()
	if j.finish == "" {
		j.finish, j.err, j.tokens, j.timings = reason, err, tokens, t
	}
	j.mu.Unlock()
	j.wake()
}

// take returns the text produced since the last call and, once the job is
// over, its finish reason.
func (j *job) take() (pieces []string, finish string) {
	pieces, _, finish = j.takeLogprobs()
	return pieces, finish
}

// takeLogprobs is take with each piece's token records.
func (j *job) takeLogprobs() (pieces []string, lps [][]tokenLogprob, finish string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	pieces, j.pieces = j.pieces, nil
	lps, j.lps = j.lps, nil
	return pieces, lps, j.finish
}

// wait blocks until there is news or the client leaves (false). Should the
// scheduler stop first, the job ends as cancelled.
func (j *job) wait() bool {
	select {
	case <-j.notify:
		return true
	case <-j.ctx.Done():
		return false
	case <-j.stopped:
		j.end(finishCancelled, errShutdown, 0, timings{})
		return true
	}
}

// result is the job's outcome once finished.
func (j *job) result() (tokens int, t timings, err error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.tokens, j.timings, j.err
}

func msSince(t time.Time) float64 { return float64(time.Since(t).Nanoseconds()) / 1e6 }
