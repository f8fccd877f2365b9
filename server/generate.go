package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"strings"
	"time"
)

func (s *Server) chatCompletions(w http.ResponseWriter, r *http.Request) {
	var req chatRequest
	if e := s.decodeBody(w, r, &req); e != nil {
		writeError(w, e)
		return
	}
	if e := s.checkModel(req.Model); e != nil {
		writeError(w, e)
		return
	}
	msgs, e := chatMessages(req.Messages)
	if e != nil {
		writeError(w, e)
		return
	}
	tools := takeTools(&req.samplingFields)
	g, e := s.sampling(&req.samplingFields)
	if e == nil {
		e = outputs(&g, &req.samplingFields, true)
	}
	var tp *toolPlan
	if e == nil {
		tp, e = s.toolSetup(&g, tools, &req.samplingFields)
	}
	if e != nil {
		writeError(w, e)
		return
	}
	prompt, e := s.toolPrompt(msgs, tp)
	if e != nil {
		writeError(w, e)
		return
	}
	ids := EncodeChat(s.model.Tok, prompt)
	if e := s.fit(&g, len(ids), "messages"); e != nil {
		writeError(w, e)
		return
	}
	s.generate(w, r, &req.samplingFields, newJob(nil, ids, false, g), true)
}

func chatMessages(in []chatMessage) ([]ChatMessage, *apiError) {
	if len(in) == 0 {
		return nil, badRequest("messages", "invalid_value", "messages must be a non-empty array")
	}
	out := make([]ChatMessage, len(in))
	for i, m := range in {
		role := m.Role
		switch role {
		case "developer":
			role = "system" // OpenAI's newer name; templates know "system"
		case "system", "user", "assistant", "tool":
		default:
			return nil, badRequest("messages", "invalid_value", "messages[%d].role must be system, developer, user, assistant or tool, not %s", i, quote(m.Role))
		}
		if !m.Content.isSet && role != "assistant" {
			return nil, badRequest("messages", "invalid_value", "messages[%d].content is required", i)
		}
		calls, e := parseToolCalls(m.ToolCalls, i)
		if e != nil {
			return nil, e
		}
		out[i] = ChatMessage{Role: role, Content: m.Content.text, Name: m.Name, ToolCalls: calls, ToolCallID: m.ToolCallID}
	}
	return out, nil
}

func (s *Server) completions(w http.ResponseWriter, r *http.Request) {
	var req completionRequest
	if e := s.decodeBody(w, r, &req); e != nil {
		writeError(w, e)
		return
	}
	if e := s.checkModel(req.Model); e != nil {
		writeError(w, e)
		return
	}
	if !req.Prompt.isSet {
		writeError(w, badRequest("prompt", "missing_field", "prompt is required"))
		return
	}
	g, e := s.sampling(&req.samplingFields)
	if e == nil {
		e = outputs(&g, &req.samplingFields, false)
	}
	if e != nil {
		writeError(w, e)
		return
	}
	ids, first, bosAdded := req.Prompt.tokens, false, false
	if e := s.checkIDs(ids, "prompt"); e != nil {
		writeError(w, e)
		return
	}
	if ids == nil {
		ids, first, bosAdded = s.textPrompt(req.Prompt.text)
	}
	if e := s.fit(&g, len(ids), "prompt"); e != nil {
		writeError(w, e)
		return
	}
	j := newJob(nil, ids, first, g)
	j.promptText, j.bosAdded = req.Prompt.text, bosAdded
	if req.Prompt.tokens != nil {
		j.promptText = s.model.Tok.Decode(ids)
	}
	s.generate(w, r, &req.samplingFields, j, false)
}

// textPrompt tokenizes a completion's text prompt as pinfer run does: BOS
// first, and an empty prompt BOS alone, the output then starting the text
// (first). bosAdded says ids[0] is a BOS the server put there, not one
// of the text's (/v1/completions' echo leaves it out).
func (s *Server) textPrompt(text string) (ids []int, first, bosAdded bool) {
	ids, first = s.model.Encode(text), text == ""
	if len(ids) == 0 {
		ids = []int{s.model.Tok.BOS()}
	}
	bos := s.model.Tok.BOS()
	bosAdded = bos >= 0 && ids[0] == bos && (text == "" || s.model.Tok.Vocab().AddBOS)
	return ids, first, bosAdded
}

// checkIDs checks that a prompt sent as token ids is in the vocabulary.
func (s *Server) checkIDs(ids []int, param string) *apiError {
	for _, id := range ids {
		if id < 0 || id >= s.model.Tok.Size() {
			return badRequest(param, "invalid_value", "token id %d is outside the vocabulary of %d", id, s.model.Tok.Size())
		}
	}
	return nil
}

// generate queues the job and answers with its result, whole or streamed.
func (s *Server) generate(w http.ResponseWriter, r *http.Request, f *samplingFields, j *job, chat bool) {
	end, e := s.submit(r, j)
	if e != nil {
		writeError(w, e)
		return
	}
	defer end()
	head := completion{ID: "cmpl-" + randomID(), Object: "text_completion", Created: time.Now().Unix(), Model: s.cfg.ModelName}
	if chat {
		head.ID, head.Object = "chatcmpl-"+randomID(), "chat.completion"
	}
	if f.Stream {
		s.stream(w, j, head, chat, f.StreamOptions != nil && f.StreamOptions.IncludeUsage)
		return
	}
	var text strings.Builder
	lw := newLogprobWriter(s.model.Tok, j, chat)
	for {
		pieces, lps, fin := j.takeLogprobs()
		for i, p := range pieces {
			text.WriteString(p)
			lw.add(p, lps[i])
		}
		if fin != "" {
			break
		}
		if !j.wait() {
			return // the client left
		}
	}
	n, t, err := j.result()
	if err != nil {
		writeError(w, failure(err))
		return
	}
	_, fin := j.take()
	out := text.String()
	choice := chatChoice{FinishReason: &fin, Logprobs: lw.flush(true)}
	if chat && j.params.tools != nil {
		choice.Message, fin = newToolParser(j.params.tools).message(out, fin)
	} else if chat {
		choice.Message = &chatOut{Role: "assistant", Content: &out}
	} else {
		choice.Text = &out
	}
	head.Choices = []chatChoice{choice}
	head.Usage = newUsage(len(j.prompt), n, t)
	head.Timings = &t
	writeJSON(w, http.StatusOK, head)
}

// submit queues the job for the scheduler, which every generation request
// goes through (OpenAI's endpoints and ollama's alike). The job ends when
// end is called, which the handler defers, however it returns: the
// scheduler then frees the slot at its next step.
func (s *Server) submit(r *http.Request, j *job) (end func(), e *apiError) {
	if s.draining.Load() {
		return nil, newError(http.StatusServiceUnavailable, "server_error", "shutting_down", "%v", errShutdown)
	}
	ctx, cancel := context.WithCancel(r.Context())
	j.ctx, j.stopped = ctx, s.loopDone
	s.metrics.requests.Add(1)
	s.queue.push(j)
	return func() {
		s.queue.remove(j)
		cancel()
	}, nil
}

// failure is the error of a request that ended without its answer.
func failure(err error) *apiError {
	if err == errShutdown {
		return newError(http.StatusServiceUnavailable, "server_error", "shutting_down", "%v", err)
	}
	return newError(http.StatusInternalServerError, "server_error", "", "%v", err)
}

func randomID() string {
	b := make([]byte, 12)
	rand.Read(b)
	return hex.EncodeToString(b)
}
