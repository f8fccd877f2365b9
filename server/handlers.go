package server

import (
	"net/http"
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
