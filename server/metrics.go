package server

import (
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
)

// metrics are the server's counters; the scheduler and handlers update them
// without locks.
type metrics struct {
	requests     atomic.Int64 // generation requests accepted
	promptTokens atomic.Int64
	predicted    atomic.Int64
	slotsBusy    atomic.Int64
	slotsTotal   int
	steps        atomic.Int64 // batched decode steps
	stepRows     atomic.Int64 // sequences decoded in them: rows/steps is the mean batch
	// With a draft model: the tokens drafted and those the sampler picked.
	drafted       atomic.Int64
	draftAccepted atomic.Int64
}

// serveMetrics writes the Prometheus text exposition format (version 0.0.4).
func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request) {
	var b strings.Builder
	put := func(name, typ, help string, v int64) {
		fmt.Fprintf(&b, "# HELP pinfer_%s %s\n# TYPE pinfer_%s %s\npinfer_%s %d\n", name, help, name, typ, name, v)
	}
	put("requests_total", "counter", "Generation requests accepted (chat and text completions).", s.metrics.requests.Load())
	put("prompt_tokens_total", "counter", "Prompt tokens processed.", s.metrics.promptTokens.Load())
	put("tokens_predicted_total", "counter", "Tokens generated.", s.metrics.predicted.Load())
	put("decode_steps_total", "counter", "Batched decode steps (one forward pass over all busy slots).", s.metrics.steps.Load())
	put("decode_rows_total", "counter", "Sequences decoded in those steps; divided by the steps, the mean batch size.", s.metrics.stepRows.Load())
	if s.cfg.Draft != nil || s.cfg.Lookup > 0 {
		put("draft_tokens_total", "counter", "Tokens drafted (-md or --lookup) that the decode steps ran.", s.metrics.drafted.Load())
		put("draft_tokens_accepted_total", "counter", "Drafted tokens the sampler then picked; divided by the drafted, the acceptance rate.", s.metrics.draftAccepted.Load())
	}
	put("slots_busy", "gauge", "Slots decoding a request now.", s.metrics.slotsBusy.Load())
	put("slots_total", "gauge", "Slots (-np).", int64(s.metrics.slotsTotal))
	put("queue_length", "gauge", "Requests waiting for a free slot.", int64(s.queue.len()))
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	w.Write([]byte(b.String()))
}
