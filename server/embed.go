package server

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"net/http"
	"time"

	"github.com/pinfer/pinfer/engine"
)

// Embeddings, as llama-server's (--embeddings) and ollama's give them: a
// text's embedding is the hidden state the output projection reads (the
// final norm's output, graph.Runner.Hidden), pooled over its positions by
// the mean (the default, as llama-server's for OpenAI's clients) or the
// last one, then normalized by its euclidean norm, as llama-server's
// embd_normalize 2 (its default) does.

// Pooling names the ways a sequence's hidden rows become one vector
// (engine.Pool).
const (
	PoolingMean = engine.PoolingMean
	PoolingLast = engine.PoolingLast
	PoolingCLS  = engine.PoolingCLS
)

// embedWork is an embedding request inside its job: the scheduler fills out.
type embedWork struct {
	inputs  [][]int
	pooling string
	norm    int // llama-server's embd_normalize: -1 none, 0 max abs, 1 taxicab, 2 euclidean, >2 p-norm
	out     [][]float32
}

// runEmbed runs an embedding job on the scheduler goroutine, the only one
// that runs the model. It uses a session of its own rather than a slot's:
// a slot's cache holds its conversation's prompt for the next turn to
// reuse, which an embedding would wipe, and an embedding need not wait for
// a free slot while every slot is generating. Its KV cache (one context's)
// is made on the first request.
func (s *Server) runEmbed(j *job) {
	if s.embedSess == nil {
		// With the whole step on the GPU, the device's program has no
		// hidden state to give: the CPU runs the program it replaced.
		p, _ := s.model.HiddenProgram() // embed checked it
		s.embedRunner = s.runner
		if p != s.model.Prog {
			s.embedRunner = p.NewRunner(s.pool)
			s.embedRunner.Predictor = s.runner.Predictor
		}
		s.embedSess = s.model.NewSessionOn(p, s.nctx, s.pool)
	}
	e, start, n := j.embed, time.Now(), 0
	for _, ids := range e.inputs {
		v, err := s.model.Embed(s.embedRunner, s.embedSess, ids, e.pooling, e.norm)
		if err != nil {
			j.end(finishError, err, 0, timings{})
			return
		}
		e.out = append(e.out, v[0]) // pooled: one vector (New refuses none)
		n += len(ids)
	}
	s.metrics.promptTokens.Add(int64(n))
	t := timings{PromptN: n, PromptMs: msSince(start)}
	t.Fill()
	j.end(finishStop, nil, 0, t)
}

// embed queues the inputs as one job and waits for their vectors.
func (s *Server) embed(r *http.Request, inputs [][]int, norm int) ([][]float32, timings, *apiError) {
	if _, err := s.model.HiddenProgram(); err != nil {
		return nil, timings{}, newError(http.StatusNotImplemented, "invalid_request_error", "embeddings_unavailable",
			"embeddings are not available for this graph: %v", err)
	}
	j := newJob(nil, nil, false, genParams{})
	j.embed = &embedWork{inputs: inputs, pooling: s.cfg.Pooling, norm: norm}
	end, e := s.submit(r, j)
	if e != nil {
		return nil, timings{}, e
	}
	defer end()
	for {
		if _, fin := j.take(); fin != "" {
			break
		}
		if !j.wait() {
			return nil, timings{}, newError(499, "invalid_request_error", "", "the client left") // nobody reads it
		}
	}
	_, t, err := j.result()
	if err != nil {
		return nil, t, failure(err)
	}
	return j.embed.out, t, nil
}

// embedIDs tokenizes a text as /v1/completions does (BOS first; an empty
// text is BOS alone) and checks that it fits the context.
func (s *Server) embedIDs(text string, param string) ([]int, *apiError) {
	ids := s.model.Encode(text)
	if len(ids) == 0 && s.model.Tok.BOS() >= 0 {
		ids = []int{s.model.Tok.BOS()}
	}
	return ids, s.embedFits(ids, param)
}

func (s *Server) embedFits(ids []int, param string) *apiError {
	if len(ids) == 0 {
		return badRequest(param, "invalid_value", "%s: an input has no tokens", param)
	}
	if len(ids) > s.nctx {
		return badRequest(param, "context_length_exceeded", "an input has %d tokens, more than the context of %d", len(ids), s.nctx)
	}
	return nil
}

// embedInput is OpenAI's "input": a string, a list of strings, a list of
// token ids, or a list of such lists.
type embedInput struct {
	texts []string
	ids   [][]int
	isSet bool
}

func (in *embedInput) UnmarshalJSON(b []byte) error {
	*in = embedInput{}
	if isNull(b) {
		return nil
	}
	in.isSet = true
	var one string
	if json.Unmarshal(b, &one) == nil {
		in.texts = []string{one}
		return nil
	}
	var ids []int
	if json.Unmarshal(b, &ids) == nil && len(ids) > 0 {
		in.ids = [][]int{ids}
		return nil
	}
	if json.Unmarshal(b, &in.texts) == nil && len(in.texts) > 0 {
		return nil
	}
	in.texts = nil
	if json.Unmarshal(b, &in.ids) == nil && len(in.ids) > 0 {
		return nil
	}
	return &fieldError{"input", "input must be a string, a non-empty array of strings, a non-empty array of token ids, or an array of such arrays"}
}

type embeddingRequest struct {
	Model          string     `json:"model"`
	Input          embedInput `json:"input"`
	EncodingFormat string     `json:"encoding_format"`
	Dimensions     *int       `json:"dimensions"`
	// EmbdNormalize is llama-server's: 2 (euclidean) unless set.
	EmbdNormalize *int   `json:"embd_normalize"`
	User          string `json:"user"`
}

type embeddingData struct {
	Object    string `json:"object"`
	Index     int    `json:"index"`
	Embedding any    `json:"embedding"` // []float32, or a base64 string
}

type embeddingResponse struct {
	Object string          `json:"object"`
	Data   []embeddingData `json:"data"`
	Model  string          `json:"model"`
	Usage  struct {
		PromptTokens int `json:"prompt_tokens"`
		TotalTokens  int `json:"total_tokens"`
	} `json:"usage"`
}

// dim is the embeddings' length: the hidden state's width.
func (s *Server) dim() int {
	h, err := s.model.Prog.HiddenNode()
	if err != nil {
		return 0
	}
	return s.model.Prog.Nodes[h].Cols
}

// embeddings is OpenAI's POST /v1/embeddings.
func (s *Server) embeddings(w http.ResponseWriter, r *http.Request) {
	var req embeddingRequest
	if e := s.decodeBody(w, r, &req); e != nil {
		writeError(w, e)
		return
	}
	if e := s.checkModel(req.Model); e != nil {
		writeError(w, e)
		return
	}
	if !req.Input.isSet {
		writeError(w, badRequest("input", "missing_field", "input is required"))
		return
	}
	if f := req.EncodingFormat; f != "" && f != "float" && f != "base64" {
		writeError(w, badRequest("encoding_format", "invalid_value", "encoding_format must be float or base64, not %s", quote(f)))
		return
	}
	if d := req.Dimensions; d != nil && *d != s.dim() {
		writeError(w, badRequest("dimensions", "unsupported_value", "dimensions: this model's embeddings have %d, and cannot be shortened", s.dim()))
		return
	}
	norm := 2
	if req.EmbdNormalize != nil {
		norm = *req.EmbdNormalize
	}
	inputs := req.Input.ids
	for _, ids := range inputs {
		if e := s.checkIDs(ids, "input"); e != nil {
			writeError(w, e)
			return
		}
		if e := s.embedFits(ids, "input"); e != nil {
			writeError(w, e)
			return
		}
	}
	for _, text := range req.Input.texts {
		ids, e := s.embedIDs(text, "input")
		if e != nil {
			writeError(w, e)
			return
		}
		inputs = append(inputs, ids)
	}
	vecs, _, e := s.embed(r, inputs, norm)
	if e != nil {
		writeError(w, e)
		return
	}
	out := embeddingResponse{Object: "list", Model: s.cfg.ModelName, Data: make([]embeddingData, len(vecs))}
	for i, v := range vecs {
		out.Data[i] = embeddingData{Object: "embedding", Index: i, Embedding: v}
		if req.EncodingFormat == "base64" {
			// OpenAI's: the little-endian float32s, base64-encoded.
			b := make([]byte, 4*len(v))
			for k, x := range v {
				binary.LittleEndian.PutUint32(b[4*k:], math.Float32bits(x))
			}
			out.Data[i].Embedding = base64.StdEncoding.EncodeToString(b)
		}
		out.Usage.PromptTokens += len(inputs[i])
	}
	out.Usage.TotalTokens = out.Usage.PromptTokens
	writeJSON(w, http.StatusOK, out)
}

// ollamaEmbedRequest is the body of /api/embed (input) and of the legacy
// /api/embeddings (prompt).
type ollamaEmbedRequest struct {
	Model     string          `json:"model"`
	Input     json.RawMessage `json:"input"`
	Prompt    string          `json:"prompt"`
	Truncate  *bool           `json:"truncate"`
	Opts      json.RawMessage `json:"options"`
	KeepAlive json.RawMessage `json:"keep_alive"`
	// Dimensions, as ollama's, must be the model's (or absent).
	Dimensions int `json:"dimensions"`
}

// ollamaEmbedDecode reads the body of /api/embed or /api/embeddings and
// checks the model and dimensions, answering the error itself when one
// fails (as ollamaDecode for the generation endpoints).
func (s *Server) ollamaEmbedDecode(w http.ResponseWriter, r *http.Request) (*ollamaEmbedRequest, bool) {
	var req ollamaEmbedRequest
	e := s.decodeBody(w, r, &req)
	if e == nil {
		e = s.ollamaCheckModel(req.Model)
	}
	if e == nil && req.Dimensions != 0 && req.Dimensions != s.dim() {
		e = badRequest("dimensions", "unsupported_value", "dimensions: this model's embeddings have %d, and cannot be shortened", s.dim())
	}
	if e != nil {
		ollamaFail(w, e)
		return nil, false
	}
	return &req, true
}

// ollamaEmbed is ollama's POST /api/embed: a string or a list of them, each
// embedding L2-normalized. An input longer than the context is a 400
// unless truncate is true (ollama's default is to truncate; this server
// cuts a text only when asked).
func (s *Server) ollamaEmbed(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	req, ok := s.ollamaEmbedDecode(w, r)
	if !ok {
		return
	}
	var texts []string
	var one string
	switch {
	case len(req.Input) == 0 || isNull(req.Input):
	case json.Unmarshal(req.Input, &one) == nil:
		if one != "" { // as ollama: an empty input embeds nothing
			texts = []string{one}
		}
	case json.Unmarshal(req.Input, &texts) == nil:
	default:
		ollamaFail(w, badRequest("input", "invalid_type", "input must be a string or an array of strings"))
		return
	}
	var inputs [][]int
	n := 0
	for _, text := range texts {
		ids := s.model.Encode(text)
		if len(ids) > s.nctx && req.Truncate != nil && *req.Truncate {
			ids = ids[:s.nctx]
		}
		if e := s.embedFits(ids, "input"); e != nil {
			ollamaFail(w, e)
			return
		}
		inputs = append(inputs, ids)
		n += len(ids)
	}
	vecs := [][]float32{}
	if len(inputs) > 0 {
		var e *apiError
		if vecs, _, e = s.embed(r, inputs, 2); e != nil {
			ollamaFail(w, e)
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"model":             req.Model,
		"embeddings":        vecs,
		"total_duration":    time.Since(start).Nanoseconds(),
		"load_duration":     0, // the model is loaded already
		"prompt_eval_count": n,
	})
}

// ollamaEmbeddings is ollama's legacy POST /api/embeddings: one prompt, its
// embedding not normalized (as ollama's legacy endpoint returns it); an
// empty prompt gets an empty embedding.
func (s *Server) ollamaEmbeddings(w http.ResponseWriter, r *http.Request) {
	req, ok := s.ollamaEmbedDecode(w, r)
	if !ok {
		return
	}
	if req.Prompt == "" {
		writeJSON(w, http.StatusOK, map[string]any{"embedding": []float32{}})
		return
	}
	ids := s.model.Encode(req.Prompt)
	if e := s.embedFits(ids, "prompt"); e != nil {
		ollamaFail(w, e)
		return
	}
	vecs, _, e := s.embed(r, [][]int{ids}, -1)
	if e != nil {
		ollamaFail(w, e)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"embedding": vecs[0]})
}
