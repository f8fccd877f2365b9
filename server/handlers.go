package server

import (
	"encoding/json"
	"net/http"

	"github.com/pinfer/pinfer/sample"
)

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) modelObject() map[string]any {
	return map[string]any{"id": s.cfg.ModelName, "object": "model", "created": s.created, "owned_by": "pinfer",
		"meta": map[string]any{"n_ctx": s.nctx, "n_vocab": s.model.Tok.Size(), "slots": len(s.slots)}}
}

func (s *Server) listModels(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []any{s.modelObject()}})
}

func (s *Server) getModel(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if e := s.checkModel(id); e != nil || id == "" {
		if e == nil {
			e = badRequest("model", "missing_field", "no model id in the path")
		}
		writeError(w, e)
		return
	}
	writeJSON(w, http.StatusOK, s.modelObject())
}

// tokenize follows llama.cpp's /tokenize: BOS only when add_special is set.
func (s *Server) tokenize(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Content      *string `json:"content"`
		AddSpecial   bool    `json:"add_special"`
		ParseSpecial *bool   `json:"parse_special"` // llama-server's default: true
	}
	if e := s.decodeBody(w, r, &req); e != nil {
		writeError(w, e)
		return
	}
	if req.Content == nil {
		writeError(w, badRequest("content", "missing_field", "content is required"))
		return
	}
	bos := req.AddSpecial && s.model.Tok.Vocab().AddBOS
	var ids []int
	if req.ParseSpecial == nil || *req.ParseSpecial {
		ids = s.model.Tok.EncodeSpecial(*req.Content, bos)
	} else {
		ids = s.model.Tok.Encode(*req.Content, bos)
	}
	if ids == nil {
		ids = []int{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"tokens": ids})
}

func (s *Server) detokenize(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Tokens *[]int `json:"tokens"`
	}
	if e := s.decodeBody(w, r, &req); e != nil {
		writeError(w, e)
		return
	}
	if req.Tokens == nil {
		writeError(w, badRequest("tokens", "missing_field", "tokens is required"))
		return
	}
	for _, id := range *req.Tokens {
		if id < 0 || id >= s.model.Tok.Size() {
			writeError(w, badRequest("tokens", "invalid_value", "token id %d is outside the vocabulary of %d", id, s.model.Tok.Size()))
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"content": s.model.Tok.Decode(*req.Tokens)})
}

// props is llama-server's /props: what a client needs to build its own
// prompts and settings (the chat template, the context, the defaults).
func (s *Server) props(w http.ResponseWriter, r *http.Request) {
	d := sample.Defaults()
	n := s.cfg.DefaultMaxTokens
	if n == 0 {
		n = -1
	}
	sp := s.speculative(&samplingFields{}) // a request without the fields
	writeJSON(w, http.StatusOK, map[string]any{
		"default_generation_settings": map[string]any{
			"n_ctx": s.nctx,
			"params": map[string]any{"temperature": d.Temp, "top_k": d.TopK, "top_p": d.TopP, "min_p": d.MinP,
				"repeat_penalty": d.RepeatPenalty, "repeat_last_n": d.RepeatLastN, "n_predict": n,
				"speculative.n_max": sp.nmax, "speculative.n_min": sp.nmin, "speculative.p_min": sp.pmin},
		},
		"total_slots":   len(s.slots),
		"model_path":    s.model.Path,
		"chat_template": s.chat.Source,
		"bos_token":     s.chat.bos,
		"eos_token":     s.chat.eos,
		"build_info":    "pinfer",
	})
}

// applyTemplate is llama-server's /apply-template: the prompt a chat
// request's messages render to, without generating.
func (s *Server) applyTemplate(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Messages          []chatMessage     `json:"messages"`
		Tools             []json.RawMessage `json:"tools"`
		ToolChoice        json.RawMessage   `json:"tool_choice"`
		ParallelToolCalls *bool             `json:"parallel_tool_calls"`
	}
	if e := s.decodeBody(w, r, &req); e != nil {
		writeError(w, e)
		return
	}
	msgs, e := chatMessages(req.Messages)
	if e != nil {
		writeError(w, e)
		return
	}
	// With tools, the prompt a chat request with them renders (tools.go).
	tp, e := s.toolSetup(&genParams{}, toolRequest{req.Tools, req.ToolChoice, req.ParallelToolCalls}, nil)
	if e != nil {
		writeError(w, e)
		return
	}
	prompt, e := s.toolPrompt(msgs, tp)
	if e != nil {
		writeError(w, e)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"prompt": prompt})
}
