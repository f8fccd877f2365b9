package server

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// stream answers by server-sent events as OpenAI does: a chunk per piece of
// text (choices[0].delta.content for chat, choices[0].text otherwise, with
// choices[0].logprobs of its tokens when asked for), a
// last chunk with finish_reason (and llama.cpp's timings), a usage chunk
// when asked for, then "data: [DONE]". A request that fails midway gets an
// {"error": ...} event instead and the stream ends.
func (s *Server) stream(w http.ResponseWriter, j *job, head completion, chat bool, withUsage bool) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	if chat {
		head.Object = "chat.completion.chunk"
	}
	send := func(v any) bool {
		b, _ := json.Marshal(v)
		if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	chunk := func(text *string, role string, finish *string) completion {
		c := head
		ch := chatChoice{FinishReason: finish}
		if chat {
			ch.Delta = &chatOut{Role: role, Content: text}
		} else {
			if text == nil {
				text = new(string)
			}
			ch.Text = text
		}
		c.Choices = []chatChoice{ch}
		return c
	}
	if chat && !send(chunk(new(string), "assistant", nil)) {
		return
	}
	lw := newLogprobWriter(s.model.Tok, j, chat)
	// With tools, the text is parsed into content and tool_calls deltas.
	var tp *toolParser
	if chat && j.params.tools != nil {
		tp = newToolParser(j.params.tools)
	}
	sendDeltas := func(ds []*chatOut) bool {
		for _, d := range ds {
			c := head
			c.Choices = []chatChoice{{Delta: d, Logprobs: lw.flush(false)}}
			if !send(c) {
				return false
			}
		}
		return true
	}
	var fin string
	for {
		var pieces []string
		var lps [][]tokenLogprob
		pieces, lps, fin = j.takeLogprobs()
		for i, p := range pieces {
			lw.add(p, lps[i])
			if tp != nil {
				if !sendDeltas(tp.deltas(p, false)) {
					return
				}
				continue
			}
			c := chunk(&p, "", nil)
			c.Choices[0].Logprobs = lw.flush(false)
			if !send(c) {
				return
			}
		}
		if fin != "" {
			break
		}
		if !j.wait() {
			return
		}
	}
	n, t, err := j.result()
	if err != nil {
		send(map[string]any{"error": failure(err)})
		return
	}
	if tp != nil {
		if !sendDeltas(tp.deltas("", true)) {
			return
		}
		fin = toolFinish(fin, tp.sentCalls > 0)
	}
	last := chunk(nil, "", &fin)
	last.Choices[0].Logprobs = lw.flush(false)
	last.Timings = &t
	if !send(last) {
		return
	}
	if withUsage {
		u := head
		u.Choices = []chatChoice{}
		u.Usage = newUsage(len(j.prompt), n, t)
		if !send(u) {
			return
		}
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
	rc.Flush()
}
