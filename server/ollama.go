package server

// ollama's native API, beside the OpenAI one, so that clients that speak
// ollama (Open WebUI, ollama's Python and JavaScript libraries, curl
// .../api/chat) work against pinfer serve: /api/generate and /api/chat
// (streamed as NDJSON by default), /api/tags, /api/show, /api/ps and
// /api/version. A request is validated by the same code as an OpenAI one
// (sampling, the chat template, the context check) and runs as the same
// job through the same queue and scheduler; only the shape of the request
// and the answer differ. Errors are ollama's {"error": "..."} with the
// status the OpenAI side gives the same fault.

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/pinfer/pinfer/gguf"
)

// ollamaVersion is what /api/version reports: the ollama release whose
// documented API (docs/api.md: done_reason, structured `format`, /api/ps)
// these endpoints follow. Clients read it to see that an ollama-compatible
// server answers.
const ollamaVersion = "0.5.0"

// ollamaPaths are the endpoints served, for the 405 on a wrong method.
var ollamaPaths = []string{"/api/generate", "/api/chat", "/api/embed", "/api/embeddings", "/api/tags", "/api/show", "/api/ps", "/api/version"}

func (s *Server) ollamaRoutes() {
	s.mux.HandleFunc("POST /api/generate", s.ollamaAuth(s.ollamaGenerate))
	s.mux.HandleFunc("POST /api/chat", s.ollamaAuth(s.ollamaChat))
	s.mux.HandleFunc("GET /api/tags", s.ollamaAuth(s.ollamaTags))
	s.mux.HandleFunc("POST /api/show", s.ollamaAuth(s.ollamaShow))
	s.mux.HandleFunc("GET /api/ps", s.ollamaAuth(s.ollamaPS))
	// As /health, the version needs no key: clients probe it to find the
	// server, and it says nothing about the model.
	s.mux.HandleFunc("GET /api/version", s.ollamaVersion)
	s.mux.HandleFunc("/api/", s.ollamaNotFound)
	// ollama answers GET and HEAD / with this text, and its clients (the
	// ollama CLI, Open WebUI's connection check, editor plugins) probe it
	// to find a server before anything else; no key, as ollama asks none.
	// A GET pattern serves HEAD too.
	s.mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, "Ollama is running")
	})
}

// ollamaAuth is auth with ollama's error shape: the same key, checked the
// same way, on the same terms (every endpoint but the version).
func (s *Server) ollamaAuth(h http.HandlerFunc) http.HandlerFunc {
	if s.cfg.APIKey == "" {
		return h
	}
	want := []byte("Bearer " + s.cfg.APIKey)
	return func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			writeOllamaError(w, http.StatusUnauthorized, "unauthorized: incorrect or missing API key: send \"Authorization: Bearer KEY\"")
			return
		}
		h(w, r)
	}
}

func (s *Server) ollamaNotFound(w http.ResponseWriter, r *http.Request) {
	for _, p := range ollamaPaths {
		if r.URL.Path == p {
			writeOllamaError(w, http.StatusMethodNotAllowed, fmt.Sprintf("%s is not allowed on %s", r.Method, p))
			return
		}
	}
	writeOllamaError(w, http.StatusNotFound, fmt.Sprintf("no endpoint %s %s: this server answers ollama's %s", r.Method, r.URL.Path, strings.Join(ollamaPaths, ", ")))
}

func writeOllamaError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}

// ollamaFail writes an error found by the code the OpenAI endpoints share:
// its message and status, in ollama's shape.
func ollamaFail(w http.ResponseWriter, e *apiError) { writeOllamaError(w, e.Status, e.Message) }

// ollamaRequest is the body of /api/generate and /api/chat (each reads its
// own fields; ollama ignores the other's too).
type ollamaRequest struct {
	Model  string         `json:"model"`
	Stream *bool          `json:"stream"` // ollama's default: true
	Opts   *ollamaOptions `json:"options"`
	// Format asks for JSON: "json" (an object) or a schema the text must
	// match (constraint.go).
	Format json.RawMessage `json:"format"`
	// KeepAlive: the model stays loaded as long as the server, whatever
	// it says; only its 0 with nothing to generate, ollama's request to
	// unload, is answered as ollama answers it (done_reason "unload").
	KeepAlive   json.RawMessage `json:"keep_alive"`
	Think       json.RawMessage `json:"think"`
	Logprobs    bool            `json:"logprobs"`
	TopLogprobs int             `json:"top_logprobs"`

	// /api/generate
	Prompt   string            `json:"prompt"`
	System   string            `json:"system"`
	Template string            `json:"template"`
	Raw      bool              `json:"raw"`
	Suffix   string            `json:"suffix"`
	Context  []int             `json:"context"`
	Images   []json.RawMessage `json:"images"`

	// /api/chat
	Messages []ollamaMessage   `json:"messages"`
	Tools    []json.RawMessage `json:"tools"`
}

type ollamaMessage struct {
	Role      string            `json:"role"`
	Content   *string           `json:"content"`
	Images    []json.RawMessage `json:"images"`
	ToolCalls json.RawMessage   `json:"tool_calls"` // tools.go reads them
	ToolName  string            `json:"tool_name"`  // a tool message's tool
}

// ollamaOptions are the Modelfile parameters a request may set. Those that
// shape the output map onto the OpenAI side's fields and are validated
// there; those that would change it in ways the sampler cannot (typical_p,
// tfs_z, mirostat, presence and frequency penalties) are refused unless
// neutral. The rest (num_gpu, num_thread, num_batch, use_mmap, num_keep,
// penalize_newline, ...) are how ollama loads and runs the model, which
// pinfer serve fixes at start: they are ignored, as ollama ignores the
// options it does not know.
type ollamaOptions struct {
	Temperature      *float64  `json:"temperature"`
	TopK             *int      `json:"top_k"`
	TopP             *float64  `json:"top_p"`
	MinP             *float64  `json:"min_p"`
	NumPredict       *int      `json:"num_predict"`
	Seed             *int64    `json:"seed"`
	Stop             stopField `json:"stop"`
	RepeatPenalty    *float64  `json:"repeat_penalty"`
	RepeatLastN      *int      `json:"repeat_last_n"`
	NumCtx           *int      `json:"num_ctx"`
	PresencePenalty  *float64  `json:"presence_penalty"`
	FrequencyPenalty *float64  `json:"frequency_penalty"`
	TypicalP         *float64  `json:"typical_p"`
	TfsZ             *float64  `json:"tfs_z"`
	Mirostat         *float64  `json:"mirostat"`
}

// UnmarshalJSON reads options as ollama does (api.Options.FromMap): an
// integer option takes any JSON number, truncated ("num_ctx": 2048.0 is
// 2048, as Python clients often send it), a number option takes a number,
// null leaves an option unset, and unknown options are ignored; a value of
// another type is refused with ollama's message.
func (o *ollamaOptions) UnmarshalJSON(b []byte) error {
	*o = ollamaOptions{}
	if isNull(b) {
		return nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return &fieldError{"options", "options must be an object"}
	}
	ints := map[string]**int{"top_k": &o.TopK, "num_predict": &o.NumPredict, "repeat_last_n": &o.RepeatLastN, "num_ctx": &o.NumCtx}
	floats := map[string]**float64{"temperature": &o.Temperature, "top_p": &o.TopP, "min_p": &o.MinP,
		"repeat_penalty": &o.RepeatPenalty, "presence_penalty": &o.PresencePenalty, "frequency_penalty": &o.FrequencyPenalty,
		"typical_p": &o.TypicalP, "tfs_z": &o.TfsZ, "mirostat": &o.Mirostat}
	for key, raw := range m {
		if isNull(raw) {
			continue
		}
		if key == "stop" {
			if err := json.Unmarshal(raw, &o.Stop); err != nil {
				return &fieldError{"stop", fmt.Sprintf("option %q must be of an array of strings", key)}
			}
			continue
		}
		dst, isInt := ints[key]
		fdst, isFloat := floats[key]
		if !isInt && !isFloat && key != "seed" {
			continue
		}
		var num json.Number // which takes "5" too, where ollama wants a number
		if err := json.Unmarshal(raw, &num); err != nil || raw[0] == '"' {
			if isFloat {
				return &fieldError{key, fmt.Sprintf("option %q must be of type float32", key)}
			}
			return &fieldError{key, fmt.Sprintf("option %q must be of type integer", key)}
		}
		if isFloat {
			f, _ := num.Float64()
			*fdst = &f
			continue
		}
		n, err := num.Int64()
		if err != nil { // a fraction or an exponent: truncated, as ollama does
			f, _ := num.Float64()
			if math.IsInf(f, 0) || math.Abs(f) > math.MaxInt64 {
				return &fieldError{key, fmt.Sprintf("option %q is out of range: %s", key, num)}
			}
			n = int64(f)
		}
		if key == "seed" {
			o.Seed = &n
			continue
		}
		if n != int64(int(n)) {
			return &fieldError{key, fmt.Sprintf("option %q is out of range: %s", key, num)}
		}
		v := int(n)
		*dst = &v
	}
	return nil
}

// ollamaParams turns a request's options into a job's parameters.
//
// Defaults: the options a request leaves out take the same values as on
// the OpenAI endpoints (llama.cpp's: temperature 0.8, top_k 40, top_p 0.95,
// min_p 0.05, repeat_penalty 1.0, repeat_last_n 64, the server's -n for
// num_predict, by default until the context is full), not ollama's
// built-in ones (top_p 0.9, min_p 0, repeat_penalty 1.1). One server then
// gives one model one behaviour whichever API a client speaks: the same
// request at temperature 0 gives the same text on /api/chat and on
// /v1/chat/completions, where ollama's repeat_penalty 1.1 would change
// even a greedy answer. ollama's own defaults are in any case overridden by
// most models' Modelfiles; /api/show lists the ones used here.
//
// num_predict: -1 (ollama's default) and -2 run until the context is full,
// as does 0, which ollama also reads as no limit; a number past what the
// context holds stops there with done_reason "length" rather than being
// refused, as ollama never refuses one. num_ctx cannot grow the context,
// whose caches the slots allocate at start (-c): a larger one is ignored
// (clients such as Open WebUI send one per model, and refusing it would
// refuse every chat), and a smaller one is honoured as a cap on prompt and
// reply together.
func (s *Server) ollamaParams(o *ollamaOptions) (genParams, int, *apiError) {
	if o == nil {
		o = &ollamaOptions{}
	}
	f := samplingFields{Temperature: o.Temperature, TopK: o.TopK, TopP: o.TopP, MinP: o.MinP, Seed: o.Seed,
		RepeatPenalty: o.RepeatPenalty, RepeatLastN: o.RepeatLastN, PresencePenalty: o.PresencePenalty, FrequencyPenalty: o.FrequencyPenalty}
	for _, c := range []struct {
		name    string
		v       *float64
		neutral float64
	}{{"typical_p", o.TypicalP, 1}, {"tfs_z", o.TfsZ, 1}, {"mirostat", o.Mirostat, 0}} {
		if c.v != nil && *c.v != c.neutral {
			return genParams{}, 0, badRequest(c.name, "unsupported_value", "options.%s is not supported (only %g, which turns it off)", c.name, c.neutral)
		}
	}
	g, e := s.sampling(&f)
	if e != nil {
		e.Message = "options: " + e.Message
		return g, 0, e
	}
	// ollama takes any number of stop strings, where OpenAI's API caps them at 4.
	for _, st := range o.Stop {
		if st != "" {
			g.stops.words = append(g.stops.words, st)
		}
	}
	if n := o.NumPredict; n != nil {
		switch {
		case *n < -2:
			return g, 0, badRequest("num_predict", "invalid_value", "options.num_predict must be -1 (no limit), -2 (fill the context) or 0 or more, not %d", *n)
		case *n > 0:
			g.maxTokens = *n
			if s.cfg.ContextShift {
				g.maxName = "num_predict" // past the context it shifts, as ollama's
			}
		default:
			g.maxTokens = -1
		}
	}
	numCtx := 0
	if o.NumCtx != nil {
		if *o.NumCtx < 0 {
			return g, 0, badRequest("num_ctx", "invalid_value", "options.num_ctx must be 0 or more, not %d", *o.NumCtx)
		}
		numCtx = *o.NumCtx
	}
	return g, numCtx, nil
}

// ollamaFit is fit for ollama's options: num_predict stops at a full
// context instead of being refused (g.maxName is empty), and a num_ctx
// below the server's caps prompt and reply together.
func (s *Server) ollamaFit(g *genParams, nPrompt, numCtx int, param string) *apiError {
	if e := s.fit(g, nPrompt, param); e != nil {
		return e
	}
	if numCtx <= 0 || numCtx >= s.nctx {
		return nil
	}
	if nPrompt >= numCtx {
		return badRequest("num_ctx", "context_length_exceeded",
			"the prompt has %d tokens but options.num_ctx is %d (at least one must be left to generate)", nPrompt, numCtx)
	}
	if most := numCtx - nPrompt; g.maxTokens < 0 || g.maxTokens > most {
		g.maxTokens = most
	}
	return nil
}

// ollamaDecode reads the body of /api/generate or /api/chat and checks it
// (ollamaCheck), answering the error itself when it fails.
func (s *Server) ollamaDecode(w http.ResponseWriter, r *http.Request) (*ollamaRequest, bool) {
	var req ollamaRequest
	e := s.decodeBody(w, r, &req)
	if e == nil {
		e = s.ollamaCheck(&req)
	}
	if e != nil {
		ollamaFail(w, e)
		return nil, false
	}
	return &req, true
}

// ollamaCheck validates what both generation endpoints share: the model
// and the fields asking for more than text.
func (s *Server) ollamaCheck(req *ollamaRequest) *apiError {
	if e := s.ollamaCheckModel(req.Model); e != nil {
		return e
	}
	var think any
	json.Unmarshal(req.Think, &think)
	if think != nil && think != false {
		return badRequest("think", "unsupported_value", "think is not supported")
	}
	if req.Logprobs || req.TopLogprobs != 0 {
		return badRequest("logprobs", "unsupported_value", "logprobs is not supported")
	}
	return nil
}

// ollamaCheckModel checks a request's model name: present, and served.
func (s *Server) ollamaCheckModel(name string) *apiError {
	if name == "" {
		return badRequest("model", "missing_field", "model is required")
	}
	if !s.ollamaModel(name) {
		return &apiError{Status: http.StatusNotFound, Message: fmt.Sprintf("model %s not found: this server serves %s", quote(name), quote(s.ollamaName()))}
	}
	return nil
}

// ollamaName is the model's name as ollama lists it: name:tag.
func (s *Server) ollamaName() string {
	if strings.Contains(s.cfg.ModelName, ":") {
		return s.cfg.ModelName
	}
	return s.cfg.ModelName + ":latest"
}

// ollamaModel accepts the served name or the file's, with or without
// ollama's default tag.
func (s *Server) ollamaModel(name string) bool {
	name = strings.TrimSuffix(name, ":latest")
	return name == strings.TrimSuffix(s.cfg.ModelName, ":latest") || name == s.fileName
}

func (s *Server) ollamaGenerate(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	req, ok := s.ollamaDecode(w, r)
	if !ok {
		return
	}
	for _, c := range []struct {
		name, why string
		on        bool
	}{
		// ollama's templates are Go text/template, which this server does
		// not render; the model's chat template (or --chat-template-file)
		// applies, and raw sends a prompt as it is.
		{"template", "is not supported: the model's chat template applies (send raw: true with the prompt already formatted)", req.Template != ""},
		{"suffix", "is not supported", req.Suffix != ""},
		{"images", "are not supported: the model reads text only", len(req.Images) > 0},
		// context is the token ids a previous answer returned, which this
		// server does not return: send the conversation to /api/chat.
		{"context", "is not supported: send the conversation to /api/chat", len(req.Context) > 0},
		{"system", "cannot be used with raw: a raw prompt is sent as it is", req.Raw && req.System != ""},
	} {
		if c.on {
			ollamaFail(w, badRequest(c.name, "unsupported_value", "%s %s", c.name, c.why))
			return
		}
	}
	g, numCtx, e := s.ollamaParams(req.Opts)
	if e == nil {
		g.grammar, e = ollamaFormat(req.Format)
	}
	if e != nil {
		ollamaFail(w, e)
		return
	}
	if req.Prompt == "" && req.System == "" {
		// ollama loads the model and answers at once; it is loaded already.
		s.ollamaLoaded(w, req.Model, false, keepAliveZero(req.KeepAlive))
		return
	}
	var ids []int
	if req.Raw {
		// As /v1/completions: BOS first, the text as it is.
		ids = s.model.Encode(req.Prompt)
	} else {
		// ollama renders the model's template over the system message and
		// the prompt as the user's: the chat template does that here.
		var msgs []ChatMessage
		if req.System != "" {
			msgs = append(msgs, ChatMessage{Role: "system", Content: req.System})
		}
		msgs = append(msgs, ChatMessage{Role: "user", Content: req.Prompt})
		if ids, e = s.ollamaChatIDs(msgs, nil); e != nil {
			ollamaFail(w, e)
			return
		}
	}
	if e := s.ollamaFit(&g, len(ids), numCtx, "prompt"); e != nil {
		ollamaFail(w, e)
		return
	}
	s.ollamaRun(w, r, newJob(nil, ids, false, g), req.Model, req.Stream == nil || *req.Stream, false, start)
}

func (s *Server) ollamaChat(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	req, ok := s.ollamaDecode(w, r)
	if !ok {
		return
	}
	g, numCtx, e := s.ollamaParams(req.Opts)
	if e == nil {
		g.grammar, e = ollamaFormat(req.Format)
	}
	var tp *toolPlan
	if e == nil {
		tp, e = s.ollamaTools(&g, req.Tools, req.Format)
	}
	if e != nil {
		ollamaFail(w, e)
		return
	}
	if len(req.Messages) == 0 {
		s.ollamaLoaded(w, req.Model, true, keepAliveZero(req.KeepAlive))
		return
	}
	in := make([]chatMessage, len(req.Messages))
	for i, m := range req.Messages {
		if len(m.Images) > 0 {
			ollamaFail(w, badRequest("messages", "unsupported_value", "messages[%d].images are not supported: the model reads text only", i))
			return
		}
		in[i] = chatMessage{Role: m.Role, ToolCalls: m.ToolCalls, Name: m.ToolName}
		if m.Content != nil {
			in[i].Content = contentField{text: *m.Content, isSet: true}
		}
	}
	msgs, e := chatMessages(in)
	if e != nil {
		ollamaFail(w, e)
		return
	}
	ids, e := s.ollamaChatIDs(msgs, tp)
	if e != nil {
		ollamaFail(w, e)
		return
	}
	if e := s.ollamaFit(&g, len(ids), numCtx, "messages"); e != nil {
		ollamaFail(w, e)
		return
	}
	s.ollamaRun(w, r, newJob(nil, ids, false, g), req.Model, req.Stream == nil || *req.Stream, true, start)
}

// ollamaChatIDs renders and tokenizes a conversation as chatCompletions does.
func (s *Server) ollamaChatIDs(msgs []ChatMessage, tp *toolPlan) ([]int, *apiError) {
	prompt, e := s.toolPrompt(msgs, tp)
	if e != nil {
		return nil, e
	}
	return EncodeChat(s.model.Tok, prompt), nil
}

// ollamaLoaded is ollama's answer to a request with nothing to generate,
// which loads the model: done at once, done_reason "load", or "unload"
// when keep_alive is 0, ollama's way to unload a model (docs/api.md,
// "Unload a model"). The model here stays loaded, the server's for its
// life, but a client asking to unload gets the answer it waits for.
func (s *Server) ollamaLoaded(w http.ResponseWriter, model string, chat, unload bool) {
	out := ollamaResponse{Model: model, CreatedAt: ollamaTime(time.Now()), Done: true, DoneReason: "load"}
	if unload {
		out.DoneReason = "unload"
	}
	empty := ""
	if chat {
		out.Message = &ollamaOut{Role: "assistant", Content: ""}
	} else {
		out.Response = &empty
	}
	writeJSON(w, http.StatusOK, out)
}

// keepAliveZero reports whether keep_alive is 0 as ollama reads it: a
// number of seconds, or a duration string ("0", "0s", "0m").
func keepAliveZero(raw json.RawMessage) bool {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return false
	}
	switch v := v.(type) {
	case float64:
		return v == 0
	case string:
		d, err := time.ParseDuration(v)
		return err == nil && d == 0
	}
	return false
}

// ollamaResponse is every answer and stream line of /api/generate
// (Response) and /api/chat (Message); Stats only on the last.
type ollamaResponse struct {
	Model      string     `json:"model"`
	CreatedAt  string     `json:"created_at"`
	Response   *string    `json:"response,omitempty"`
	Message    *ollamaOut `json:"message,omitempty"`
	Done       bool       `json:"done"`
	DoneReason string     `json:"done_reason,omitempty"`
	*ollamaStats
}

type ollamaOut struct {
	Role      string           `json:"role"`
	Content   string           `json:"content"`
	ToolCalls []ollamaToolCall `json:"tool_calls,omitempty"` // tools.go
}

// ollamaStats are the last object's counts and durations, in nanoseconds.
// prompt_eval_count is the prompt's tokens, all of them, as ollama counts
// them (the OpenAI side's usage.prompt_tokens); prompt_eval_duration times
// the part that ran, what the slot's cache did not hold. eval_count is the
// tokens generated (usage.completion_tokens) and eval_duration the passes
// after the prompt's, as the OpenAI side's timings. load_duration is 0:
// the model was loaded when the server started.
type ollamaStats struct {
	TotalDuration      int64 `json:"total_duration"`
	LoadDuration       int64 `json:"load_duration"`
	PromptEvalCount    int   `json:"prompt_eval_count"`
	PromptEvalDuration int64 `json:"prompt_eval_duration"`
	EvalCount          int   `json:"eval_count"`
	EvalDuration       int64 `json:"eval_duration"`
}

func ollamaTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// ollamaRun queues the job as every generation request is queued and
// answers in ollama's shape: one object, or NDJSON lines of text and a
// last one with done, done_reason and the counts. A request that fails
// midway gets an {"error": ...} line and the stream ends, as ollama does.
func (s *Server) ollamaRun(w http.ResponseWriter, r *http.Request, j *job, model string, stream, chat bool, start time.Time) {
	end, e := s.submit(r, j)
	if e != nil {
		ollamaFail(w, e)
		return
	}
	defer end()
	line := func(text string) ollamaResponse {
		o := ollamaResponse{Model: model, CreatedAt: ollamaTime(time.Now())}
		if chat {
			o.Message = &ollamaOut{Role: "assistant", Content: text}
		} else {
			o.Response = &text
		}
		return o
	}
	var send func(v any) bool
	if stream {
		w.Header().Set("Content-Type", "application/x-ndjson")
		w.Header().Set("Cache-Control", "no-cache")
		w.Header().Set("X-Accel-Buffering", "no")
		w.WriteHeader(http.StatusOK)
		rc := http.NewResponseController(w)
		enc := json.NewEncoder(w) // one object and "\n" per call
		enc.SetEscapeHTML(false)
		send = func(v any) bool { return enc.Encode(v) == nil && rc.Flush() == nil }
	}
	// With tools, the text is parsed into content and tool_calls.
	var tp *toolParser
	if chat && j.params.tools != nil {
		tp = newToolParser(j.params.tools)
	}
	sendParsed := func(ms []*ollamaOut) bool {
		for _, m := range ms {
			o := line("")
			o.Message = m
			if !send(o) {
				return false
			}
		}
		return true
	}
	var text strings.Builder
	var fin string
	for {
		var pieces []string
		pieces, fin = j.take()
		for _, p := range pieces {
			switch {
			case !stream:
				text.WriteString(p)
			case tp != nil:
				if !sendParsed(tp.ollamaDeltas(p, false)) {
					return
				}
			case !send(line(p)):
				return // the client left
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
		if e := failure(err); stream {
			send(map[string]string{"error": e.Message})
		} else {
			ollamaFail(w, e)
		}
		return
	}
	last := line(text.String())
	if tp != nil && stream {
		if !sendParsed(tp.ollamaDeltas("", true)) {
			return
		}
	} else if tp != nil {
		last.Message = tp.ollamaMessage(text.String())
	}
	last.Done, last.DoneReason = true, fin
	last.ollamaStats = &ollamaStats{
		TotalDuration:      time.Since(start).Nanoseconds(),
		PromptEvalCount:    len(j.prompt),
		PromptEvalDuration: int64(t.PromptMs * 1e6),
		EvalCount:          n,
		EvalDuration:       int64(t.EvalMs * 1e6),
	}
	if stream {
		send(last)
	} else {
		writeJSON(w, http.StatusOK, last)
	}
}

func (s *Server) ollamaVersion(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"version": ollamaVersion})
}

// ollamaModelInfo is the model as /api/tags and /api/ps list it.
type ollamaModelInfo struct {
	Name       string        `json:"name"`
	Model      string        `json:"model"`
	ModifiedAt string        `json:"modified_at,omitempty"`
	Size       int64         `json:"size"`
	Digest     string        `json:"digest"`
	Details    ollamaDetails `json:"details"`
	// /api/ps
	ExpiresAt     string `json:"expires_at,omitempty"`
	SizeVRAM      *int64 `json:"size_vram,omitempty"`
	ContextLength int    `json:"context_length,omitempty"`
}

type ollamaDetails struct {
	ParentModel       string   `json:"parent_model"`
	Format            string   `json:"format"`
	Family            string   `json:"family"`
	Families          []string `json:"families"`
	ParameterSize     string   `json:"parameter_size"`
	QuantizationLevel string   `json:"quantization_level"`
}

func (s *Server) ollamaModelInfo() ollamaModelInfo {
	name := s.ollamaName()
	info := ollamaModelInfo{Name: name, Model: name, Details: s.ollamaDetails()}
	if st, err := os.Stat(s.model.Path); err == nil {
		info.Size, info.ModifiedAt = st.Size(), ollamaTime(st.ModTime())
		// ollama's digest is its manifest's sha256. Hashing a file of many
		// GB per listing is out of the question: this one names the file
		// served (path, size, time), and changes when it does.
		sum := sha256.Sum256(fmt.Appendf(nil, "%s\x00%d\x00%d", s.model.Path, st.Size(), st.ModTime().UnixNano()))
		info.Digest = hex.EncodeToString(sum[:])
	}
	return info
}

// ollamaDetails describes the file: its architecture, its parameter count
// and the type most of its weights are stored in.
func (s *Server) ollamaDetails() ollamaDetails {
	f := s.model.File
	arch := f.Arch()
	d := ollamaDetails{Format: "gguf", Family: arch, Families: []string{arch}, ParameterSize: gguf.HumanCount(f.ParamCount())}
	if typ, ok := f.WeightType(); ok {
		d.QuantizationLevel = strings.ToUpper(typ.String())
	}
	return d
}

func (s *Server) ollamaTags(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"models": []ollamaModelInfo{s.ollamaModelInfo()}})
}

// ollamaPS lists the one model, loaded for the server's life: it never
// expires, which ollama shows (for keep_alive -1) as a time far ahead.
func (s *Server) ollamaPS(w http.ResponseWriter, r *http.Request) {
	info := s.ollamaModelInfo()
	info.ModifiedAt = ""
	info.ExpiresAt = ollamaTime(time.Unix(s.created, 0).AddDate(100, 0, 0))
	vram := int64(0) // what a --vram-budget placed is not known here
	info.SizeVRAM, info.ContextLength = &vram, s.nctx
	writeJSON(w, http.StatusOK, map[string]any{"models": []ollamaModelInfo{info}})
}

// ollamaShow answers /api/show: the details, the GGUF metadata (arrays
// left empty unless verbose, as ollama does), the chat template in use,
// and the parameters: the context and the sampling defaults the server
// applies (see ollamaParams).
func (s *Server) ollamaShow(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model   string `json:"model"`
		Name    string `json:"name"` // the field's older name
		Verbose bool   `json:"verbose"`
	}
	if e := s.decodeBody(w, r, &req); e != nil {
		ollamaFail(w, e)
		return
	}
	if req.Model == "" {
		req.Model = req.Name
	}
	if e := s.ollamaCheckModel(req.Model); e != nil {
		ollamaFail(w, e)
		return
	}
	f := s.model.File
	info := map[string]any{}
	for _, kv := range f.KVs {
		info[kv.Key] = metaValue(kv.Value, req.Verbose)
	}
	if _, ok := info["general.parameter_count"]; !ok {
		info["general.parameter_count"] = f.ParamCount()
	}
	g, _, _ := s.ollamaParams(nil)
	p := g.sample
	num := func(name string, v any) string { return fmt.Sprintf("%-30s %v", name, v) }
	params := []string{num("num_ctx", s.nctx), num("num_predict", s.cfg.DefaultMaxTokens), num("temperature", p.Temp),
		num("top_k", p.TopK), num("top_p", p.TopP), num("min_p", p.MinP), num("repeat_penalty", p.RepeatPenalty), num("repeat_last_n", p.RepeatLastN)}
	tpl := s.chat.Source
	var mf strings.Builder
	fmt.Fprintf(&mf, "# Modelfile of the model pinfer serve serves\nFROM %s\nTEMPLATE \"\"\"%s\"\"\"\n", s.model.Path, tpl)
	for _, l := range params {
		fields := strings.Fields(l)
		fmt.Fprintf(&mf, "PARAMETER %s %s\n", fields[0], fields[1])
	}
	st, _ := os.Stat(s.model.Path)
	out := map[string]any{
		"modelfile":    mf.String(),
		"parameters":   strings.Join(params, "\n"),
		"template":     tpl,
		"details":      s.ollamaDetails(),
		"model_info":   info,
		"capabilities": []string{"completion", "tools"}, // tools: any template (tools.go)
	}
	if license, err := f.String("general.license"); err == nil {
		out["license"] = license
	}
	if st != nil {
		out["modified_at"] = ollamaTime(st.ModTime())
	}
	writeJSON(w, http.StatusOK, out)
}

// metaValue is a metadata value as JSON: arrays only when verbose.
func metaValue(v gguf.Value, verbose bool) any {
	if v.Type != gguf.Array {
		return v.V
	}
	if !verbose {
		return []any{}
	}
	if list, ok := v.V.([]gguf.Value); ok {
		out := make([]any, len(list))
		for i, e := range list {
			out[i] = metaValue(e, true)
		}
		return out
	}
	return v.V
}
