package server

// llama-server's native completion API, beside the OpenAI one and
// ollama's, for the scripts and clients written against llama.cpp's own
// server: POST /completion (and /completions). A request is validated by
// the code the OpenAI endpoints use (sampling, constraint, the context
// check, context shift) and runs as the same job through the same queue
// and scheduler; the request's fields, their defaults and the answer's
// shape are llama-server's (tools/server/README.md): n_predict -1 (until
// the end of text or a full context), any number of stop strings, a prompt
// of text, token ids or both, n_probs, and an answer of content, stop_type,
// stopping_word, tokens_cached and timings, or server-sent events of
// {"content", "stop": false} and a last one with "stop": true and the
// summary, with no "[DONE]" after it (llama-server sends none on this
// endpoint). Errors are llama-server's {"error": {"code", "message",
// "type"}}, the code the HTTP status.

import (
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/pinfer/pinfer/grammar"
)

// nativeRequest is the body of /completion: the OpenAI side's fields (read
// with llama-server's defaults here), and llama-server's own.
type nativeRequest struct {
	samplingFields
	Prompt       nativePrompt    `json:"prompt"`
	NPredict     *int            `json:"n_predict"`
	NProbs       *int            `json:"n_probs"`
	ReturnTokens bool            `json:"return_tokens"`
	IgnoreEOS    bool            `json:"ignore_eos"`
	IDSlot       *int            `json:"id_slot"`
	Samplers     json.RawMessage `json:"samplers"`

	// llama-server's samplers and options that pinfer's sampler does not
	// have: refused unless they are off, since each changes the text.
	Mirostat          *float64        `json:"mirostat"`
	TypicalP          *float64        `json:"typical_p"`
	DynatempRange     *float64        `json:"dynatemp_range"`
	XTCProbability    *float64        `json:"xtc_probability"`
	DryMultiplier     *float64        `json:"dry_multiplier"`
	TopNSigma         *float64        `json:"top_n_sigma"`
	AdaptiveTarget    *float64        `json:"adaptive_target"`
	MinKeep           *int            `json:"min_keep"`
	NIndent           *int            `json:"n_indent"`
	NCmpl             *int            `json:"n_cmpl"`
	NDiscard          *int            `json:"n_discard"`
	TMaxPredictMs     *float64        `json:"t_max_predict_ms"`
	PostSamplingProbs bool            `json:"post_sampling_probs"`
	GrammarLazy       bool            `json:"grammar_lazy"`
	ResponseFields    json.RawMessage `json:"response_fields"`
	Lora              json.RawMessage `json:"lora"`
}

// nativePrompt is one prompt as llama-server takes it: a text, token ids,
// a mixed array of both ([12, 34, "text", 56]), or an object with
// prompt_string; a list of one of these is that prompt. A BOS goes first
// when the prompt starts with a text (and the model adds one).
type nativePrompt struct {
	parts []promptPart
	isSet bool
}

// promptPart is a text or a run of token ids.
type promptPart struct {
	text   string
	ids    []int
	isText bool
}

var errSeveralPrompts = &fieldError{"prompt", "prompt: several prompts in one request are not supported: send each prompt (a string, an array of token ids, or a mixed array of both) in a request of its own"}

func (p *nativePrompt) UnmarshalJSON(b []byte) error {
	*p = nativePrompt{}
	if isNull(b) {
		return nil
	}
	parts, err := promptParts(b, true)
	if err != nil {
		return err
	}
	*p = nativePrompt{parts: parts, isSet: true}
	return nil
}

func promptParts(b []byte, top bool) ([]promptPart, error) {
	bad := &fieldError{"prompt", "prompt must be a string, an array of token ids, a mixed array of token ids and strings, or an object with prompt_string"}
	var text string
	if json.Unmarshal(b, &text) == nil {
		return []promptPart{{text: text, isText: true}}, nil
	}
	var obj struct {
		PromptString *string           `json:"prompt_string"`
		Multimodal   []json.RawMessage `json:"multimodal_data"`
	}
	if t := strings.TrimSpace(string(b)); strings.HasPrefix(t, "{") {
		switch {
		case json.Unmarshal(b, &obj) != nil:
			return nil, bad
		case len(obj.Multimodal) > 0:
			return nil, &fieldError{"prompt", "prompt: multimodal_data is not supported: the model reads text only"}
		case obj.PromptString == nil:
			return nil, &fieldError{"prompt", "prompt: an object prompt needs prompt_string"}
		}
		return []promptPart{{text: *obj.PromptString, isText: true}}, nil
	}
	var arr []json.RawMessage
	if json.Unmarshal(b, &arr) != nil {
		return nil, bad
	}
	if len(arr) == 0 {
		return nil, &fieldError{"prompt", "prompt must not be an empty array"}
	}
	// An array of numbers and strings with at least one number is one
	// prompt; one of strings alone, or of arrays and objects, is a list.
	var parts []promptPart
	numbers, others := 0, 0
	for _, el := range arr {
		var id int
		var s string
		switch {
		case json.Unmarshal(el, &id) == nil:
			numbers++
			if n := len(parts); n > 0 && !parts[n-1].isText {
				parts[n-1].ids = append(parts[n-1].ids, id)
			} else {
				parts = append(parts, promptPart{ids: []int{id}})
			}
		case json.Unmarshal(el, &s) == nil:
			parts = append(parts, promptPart{text: s, isText: true})
		default:
			others++
		}
	}
	switch {
	case numbers > 0 && others == 0:
		return parts, nil
	case len(arr) > 1:
		return nil, errSeveralPrompts
	case !top:
		return nil, bad
	}
	return promptParts(arr[0], false) // a list of one prompt
}

// nativeIDs tokenizes a prompt: a text alone as /v1/completions does (BOS
// first; the empty text BOS alone, the output then starting the text),
// texts among ids each without BOS but the first, which gets one when it
// starts the prompt, as llama-server does.
func (s *Server) nativeIDs(parts []promptPart) (ids []int, first bool) {
	if len(parts) == 1 && parts[0].isText {
		ids, first, _ = s.textPrompt(parts[0].text)
		return ids, first
	}
	for i, p := range parts {
		if p.isText {
			ids = append(ids, s.model.Tok.EncodeSpecial(p.text, i == 0 && s.model.Tok.Vocab().AddBOS)...)
		} else {
			ids = append(ids, p.ids...)
		}
	}
	return ids, false
}

// The samplers pinfer has, in the order it applies them, as llama-server's
// samplers field names them, and the one-letter names of its string form.
var (
	nativeSamplerOrder = []string{"penalties", "top_k", "top_p", "min_p", "temperature"}
	// Those that do nothing while their settings are off, which the
	// request cannot change (nativeOff): they may stand anywhere.
	nativeSamplersOff = map[string]bool{"dry": true, "typ_p": true, "xtc": true, "top_n_sigma": true, "adaptive_p": true}
	nativeSamplerChar = map[rune]string{'e': "penalties", 'd': "dry", 's': "top_n_sigma", 'k': "top_k", 'y': "typ_p",
		'p': "top_p", 'm': "min_p", 'x': "xtc", 't': "temperature", 'i': "infill"}
)

// nativeSamplers reads samplers: the names (or letters) of the samplers to
// apply, in order. pinfer's order is llama.cpp's default one, so a list
// in that order is honoured (a sampler left out is off, as in
// llama-server), one in another order, with infill, or without
// temperature is refused. Names llama-server does not know it ignores, and
// so does this.
func nativeSamplers(raw json.RawMessage, g *genParams) ([]string, *apiError) {
	if !present(raw) {
		return nativeSamplerOrder, nil
	}
	var names []string
	var chars string
	switch {
	case json.Unmarshal(raw, &names) == nil:
	case json.Unmarshal(raw, &chars) == nil:
		for _, c := range chars {
			if n, ok := nativeSamplerChar[c]; ok {
				names = append(names, n)
			}
		}
	default:
		return nil, badRequest("samplers", "invalid_type", "samplers must be an array of sampler names or a string of their letters")
	}
	refuse := func(format string, args ...any) *apiError {
		return badRequest("samplers", "unsupported_value", "samplers: "+format+" (pinfer applies %s in this order, any of them may be left out)", append(args, strings.Join(nativeSamplerOrder[:len(nativeSamplerOrder)-1], ", ")+" and temperature")...)
	}
	rank := map[string]int{}
	for i, n := range nativeSamplerOrder {
		rank[n] = i
	}
	var used []string
	last := -1
	for _, n := range names {
		r, ok := rank[n]
		switch {
		case n == "infill":
			return nil, refuse("infill is not supported")
		case nativeSamplersOff[n] || !ok:
			continue
		case r <= last:
			return nil, refuse("%s cannot come after %s", n, used[len(used)-1])
		}
		used, last = append(used, n), r
	}
	if last != rank["temperature"] {
		return nil, refuse("temperature must be among them")
	}
	has := func(n string) bool {
		for _, u := range used {
			if u == n {
				return true
			}
		}
		return false
	}
	p := &g.sample
	if !has("penalties") {
		p.RepeatPenalty = 1
	}
	if !has("top_k") {
		p.TopK = 0
	}
	if !has("top_p") {
		p.TopP = 1
	}
	if !has("min_p") {
		p.MinP = 0
	}
	return used, nil
}

// nativeOff refuses llama-server's options that would change the text in
// ways pinfer's sampler cannot, unless they are off.
func nativeOff(req *nativeRequest) *apiError {
	for _, c := range []struct {
		name string
		on   bool
		off  string
	}{
		{"mirostat", req.Mirostat != nil && *req.Mirostat != 0, "0"},
		{"typical_p", req.TypicalP != nil && *req.TypicalP != 1, "1"},
		{"dynatemp_range", req.DynatempRange != nil && *req.DynatempRange != 0, "0"},
		{"xtc_probability", req.XTCProbability != nil && *req.XTCProbability != 0, "0"},
		{"dry_multiplier", req.DryMultiplier != nil && *req.DryMultiplier != 0, "0"},
		{"top_n_sigma", req.TopNSigma != nil && *req.TopNSigma > 0, "-1"},
		{"adaptive_target", req.AdaptiveTarget != nil && *req.AdaptiveTarget >= 0, "a negative value"},
		{"min_keep", req.MinKeep != nil && *req.MinKeep > 1, "0"},
		{"n_indent", req.NIndent != nil && *req.NIndent != 0, "0"},
		{"n_cmpl", req.NCmpl != nil && *req.NCmpl != 1, "1: one completion per request"},
		{"n_discard", req.NDiscard != nil && *req.NDiscard != 0, "0: a context shift drops half of what follows n_keep"},
		{"t_max_predict_ms", req.TMaxPredictMs != nil && *req.TMaxPredictMs > 0, "0"},
		{"post_sampling_probs", req.PostSamplingProbs, "false: n_probs gives the model's log-probabilities"},
		{"grammar_lazy", req.GrammarLazy, "false"},
		{"response_fields", nonEmptyArray(req.ResponseFields), "[]"},
		{"lora", nonEmptyArray(req.Lora), "[]: this server loads no adapters"},
	} {
		if c.on {
			return badRequest(c.name, "unsupported_value", "%s is not supported (only %s)", c.name, c.off)
		}
	}
	return nil
}

func nonEmptyArray(raw json.RawMessage) bool {
	var a []json.RawMessage
	return present(raw) && (json.Unmarshal(raw, &a) != nil || len(a) > 0)
}

// nativeParams turns a request into a job's parameters with llama-server's
// defaults, through the OpenAI side's sampling: what differs is read
// first and taken out of its way.
func (s *Server) nativeParams(req *nativeRequest) (g genParams, n nativeOptions, e *apiError) {
	if e := nativeOff(req); e != nil {
		return g, n, e
	}
	f := req.samplingFields
	// n_predict, or the OpenAI names llama-server also reads.
	np, npName := req.NPredict, "n_predict"
	if np == nil {
		np, npName = f.MaxCompletion, "max_completion_tokens"
	}
	if np == nil {
		np, npName = f.MaxTokens, "max_tokens"
	}
	f.MaxTokens, f.MaxCompletion = nil, nil
	// llama-server takes any number of stop strings.
	stops := f.Stop
	f.Stop = nil
	// llama.cpp reads a negative temperature as greedy and a negative
	// top_k as none.
	if f.Temperature != nil && *f.Temperature < 0 {
		f.Temperature = new(float64)
	}
	if f.TopK != nil && *f.TopK < 0 {
		f.TopK = new(int)
	}
	// Nor does it cap the temperature at OpenAI's 2, which the OpenAI
	// side refuses past.
	var hot *float64
	if f.Temperature != nil && *f.Temperature > 2 {
		hot, f.Temperature = f.Temperature, nil
	}
	if g, e = s.sampling(&f); e != nil {
		return g, n, e
	}
	if hot != nil {
		g.sample.Temp = *hot
	}
	if np != nil {
		switch {
		case *np < -1:
			return g, n, badRequest(npName, "invalid_value", "%s must be -1 (until the end of the text or a full context), 0 (the prompt only) or more, not %d", npName, *np)
		case *np == -1:
			g.maxTokens = -1
		default:
			g.maxTokens = *np
			if s.cfg.ContextShift && *np > 0 {
				g.maxName = npName // past the context it shifts, as llama-server's
			}
		}
	}
	n.nPredict = g.maxTokens
	for _, st := range stops {
		if st != "" {
			g.stops.words = append(g.stops.words, st)
		}
	}
	g.stops.hit = new(string)
	// n_probs, or OpenAI's logprobs count when it is absent, as llama-server.
	switch {
	case req.NProbs != nil:
		n.nProbs = *req.NProbs
	case f.Logprobs.isNum:
		n.nProbs = f.Logprobs.n
	}
	if n.nProbs < 0 || n.nProbs > maxTopLogprobs {
		return g, n, badRequest("n_probs", "invalid_value", "n_probs must be between 0 and %d, not %d", maxTopLogprobs, n.nProbs)
	}
	// The token records (logprobs.go) carry the ids that stream events
	// and return_tokens report, and the log-probabilities of n_probs.
	g.logprobs, g.topN = n.nProbs > 0 || f.Stream || req.ReturnTokens, n.nProbs
	if req.IgnoreEOS {
		// As llama-server: a bias of -Inf on every token that ends the text.
		if g.sample.Bias == nil {
			g.sample.Bias = map[int]float64{}
		}
		for _, id := range s.model.Tok.Ends() {
			g.sample.Bias[id] = math.Inf(-1)
		}
	}
	if n.samplers, e = nativeSamplers(req.Samplers, &g); e != nil {
		return g, n, e
	}
	n.slot = -1
	if req.IDSlot != nil {
		if *req.IDSlot < -1 || *req.IDSlot >= len(s.slots) {
			return g, n, badRequest("id_slot", "invalid_value", "id_slot must be -1 (any) or a slot from 0 to %d, not %d", len(s.slots)-1, *req.IDSlot)
		}
		n.slot = *req.IDSlot
	}
	if n.grammar, e = grammarSource(&f); e != nil {
		return g, n, e
	}
	return g, n, nil
}

// nativeOptions are what the answer reports beside the job's parameters.
type nativeOptions struct {
	nPredict int // as asked (or the server's default), before the context check
	nProbs   int
	samplers []string
	slot     int    // id_slot asked for, which the job waits for; -1: any
	grammar  string // the GBNF the text is held to (a schema's, converted), or ""
}

// grammarSource is the GBNF of grammar or json_schema, which
// generation_settings shows as llama-server does; constraint compiled it.
func grammarSource(f *samplingFields) (string, *apiError) {
	switch {
	case f.Grammar != nil && *f.Grammar != "":
		return *f.Grammar, nil
	case present(f.JSONSchema):
		src, err := grammar.FromSchema(f.JSONSchema)
		if err != nil {
			return "", badRequest("json_schema", "invalid_value", "json_schema: %v", err)
		}
		return src, nil
	}
	return "", nil
}

func (s *Server) nativeCompletion(w http.ResponseWriter, r *http.Request) {
	var req nativeRequest
	if e := s.decodeBody(w, r, &req); e != nil {
		s.nativeFail(w, e)
		return
	}
	if !req.Prompt.isSet {
		s.nativeFail(w, badRequest("prompt", "missing_field", `"prompt" must be provided`))
		return
	}
	g, opt, e := s.nativeParams(&req)
	if e != nil {
		s.nativeFail(w, e)
		return
	}
	ids, first := s.nativeIDs(req.Prompt.parts)
	if e := s.checkIDs(ids, "prompt"); e != nil {
		s.nativeFail(w, e)
		return
	}
	if e := s.fit(&g, len(ids), "prompt"); e != nil {
		// As llama-server's, with the counts.
		body := nativeErrorBody(e)
		body["n_prompt_tokens"], body["n_ctx"] = len(ids), s.nctx
		writeJSON(w, e.Status, map[string]any{"error": body})
		return
	}
	j := newJob(nil, ids, first, g)
	j.promptText = s.model.Tok.Decode(ids)
	j.pin = opt.slot
	s.nativeRun(w, r, j, &req, opt)
}

// nativeProb is an entry of completion_probabilities, llama-server's
// shape: the token, its log-probability (the model's, as the OpenAI
// side's: logprobs.go) and the n_probs likeliest at its position.
type nativeProb struct {
	ID          int         `json:"id"`
	Token       string      `json:"token"`
	Bytes       []int       `json:"bytes"`
	Logprob     float64     `json:"logprob"`
	TopLogprobs []nativeTop `json:"top_logprobs"`
}

type nativeTop struct {
	ID      int     `json:"id"`
	Token   string  `json:"token"`
	Bytes   []int   `json:"bytes"`
	Logprob float64 `json:"logprob"`
}

// nativeEvent is a stream's event before the last.
type nativeEvent struct {
	Index           int          `json:"index"`
	Content         string       `json:"content"`
	Tokens          []int        `json:"tokens"`
	Stop            bool         `json:"stop"`
	IDSlot          int          `json:"id_slot"`
	TokensPredicted int          `json:"tokens_predicted"`
	TokensEvaluated int          `json:"tokens_evaluated"`
	Probs           []nativeProb `json:"completion_probabilities,omitempty"`
}

// nativeFinal is the answer, or a stream's last event (whose content and
// tokens the events before it carried).
type nativeFinal struct {
	Index              int            `json:"index"`
	Content            string         `json:"content"`
	Tokens             []int          `json:"tokens"`
	IDSlot             int            `json:"id_slot"`
	Stop               bool           `json:"stop"`
	Model              string         `json:"model"`
	TokensPredicted    int            `json:"tokens_predicted"`
	TokensEvaluated    int            `json:"tokens_evaluated"`
	GenerationSettings map[string]any `json:"generation_settings"`
	Prompt             string         `json:"prompt"`
	HasNewLine         bool           `json:"has_new_line"`
	Truncated          bool           `json:"truncated"`
	StopType           string         `json:"stop_type"`
	StoppingWord       string         `json:"stopping_word"`
	TokensCached       int            `json:"tokens_cached"`
	Timings            *timings       `json:"timings"`
	Probs              []nativeProb   `json:"completion_probabilities,omitempty"`
}

// nativeRun queues the job as every generation request is queued and
// answers in llama-server's shape, whole or as server-sent events: one per
// piece of text with its tokens (and their probabilities with n_probs),
// then the summary. The stream's headers wait for its first event, so that
// a request failing before any text gets an error status, as
// llama-server's; one failing midway gets a data: {"error": ...} event.
func (s *Server) nativeRun(w http.ResponseWriter, r *http.Request, j *job, req *nativeRequest, opt nativeOptions) {
	end, e := s.submit(r, j)
	if e != nil {
		s.nativeFail(w, e)
		return
	}
	defer end()
	stream := req.Stream
	var send func(v any) bool
	started := false
	if stream {
		rc := http.NewResponseController(w)
		send = func(v any) bool {
			if !started {
				w.Header().Set("Content-Type", "text/event-stream")
				w.Header().Set("Cache-Control", "no-cache")
				w.Header().Set("X-Accel-Buffering", "no")
				w.WriteHeader(http.StatusOK)
				started = true
			}
			b, _ := json.Marshal(v)
			if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
				return false
			}
			return rc.Flush() == nil
		}
	}
	var text strings.Builder
	var ids []int
	var probs []nativeProb
	predicted := 0
	newLine := false // has_new_line: of the text generated, streamed or not
	var fin string
	for {
		var pieces []string
		var lps [][]tokenLogprob
		pieces, lps, fin = j.takeLogprobs()
		for i, p := range pieces {
			newLine = newLine || strings.Contains(p, "\n")
			ev := nativeEvent{Content: p, Tokens: []int{}, IDSlot: j.slotID(), TokensEvaluated: len(j.prompt)}
			for _, t := range lps[i] {
				ev.Tokens = append(ev.Tokens, t.id)
				if !s.model.Tok.EndsText(t.id) {
					predicted++
				}
				if opt.nProbs > 0 {
					ev.Probs = append(ev.Probs, s.nativeProb(t))
				}
			}
			ev.TokensPredicted = predicted
			if stream {
				if !send(ev) {
					return // the client left
				}
				continue
			}
			text.WriteString(p)
			ids = append(ids, ev.Tokens...)
			probs = append(probs, ev.Probs...)
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
		if e := failure(err); started {
			send(map[string]any{"error": nativeErrorBody(e)})
		} else {
			s.nativeFail(w, e)
		}
		return
	}
	out := nativeFinal{Content: text.String(), Tokens: []int{}, IDSlot: j.slotID(), Stop: true, Model: s.cfg.ModelName,
		TokensPredicted: n, TokensEvaluated: len(j.prompt), GenerationSettings: s.nativeSettings(j, req, opt),
		Prompt: s.renderPrompt(j.prompt), TokensCached: t.CacheN, Timings: &t}
	if req.ReturnTokens && !stream {
		out.Tokens = ids
	}
	if !stream {
		out.Probs = probs
	}
	out.HasNewLine = newLine
	hit := *j.params.stops.hit
	switch {
	case fin == finishLength:
		out.StopType = "limit"
		// The context filled (or shifted) before n_predict was reached.
		out.Truncated = j.params.maxTokens != 0 && n != j.params.maxTokens || len(j.prompt)+n > s.nctx+1
	case hit != "":
		out.StopType, out.StoppingWord = "word", hit
	default:
		out.StopType = "eos"
	}
	if stream {
		send(out)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) nativeProb(t tokenLogprob) nativeProb {
	tok := s.model.Tok
	p := nativeProb{ID: t.id, Token: validPrefix(tok.Piece(t.id)), Bytes: tokenBytes(tok, t.id), Logprob: finite(t.logprob), TopLogprobs: []nativeTop{}}
	for _, a := range t.top {
		p.TopLogprobs = append(p.TopLogprobs, nativeTop{ID: a.id, Token: validPrefix(tok.Piece(a.id)), Bytes: tokenBytes(tok, a.id), Logprob: finite(a.logprob)})
	}
	return p
}

// validPrefix is s up to its first byte that is not valid UTF-8: a byte
// token's piece shows as "", its byte in bytes, as llama-server shows it.
func validPrefix(s string) string {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size <= 1 {
			return s[:i]
		}
		i += size
	}
	return s
}

// renderPrompt is the prompt as llama-server's answer shows it: decoded,
// with its control tokens (BOS) written out.
func (s *Server) renderPrompt(ids []int) string {
	tok := s.model.Tok
	var b strings.Builder
	st := tok.NewStream(true)
	for _, id := range ids {
		if tok.IsControl(id) {
			b.WriteString(st.Flush())
			b.WriteString(tok.Piece(id))
			continue
		}
		b.WriteString(st.Add(id))
	}
	b.WriteString(st.Flush())
	return b.String()
}

// nativeSettings is generation_settings: the settings the request ran
// with, defaults filled in, under llama-server's names.
func (s *Server) nativeSettings(j *job, req *nativeRequest, opt nativeOptions) map[string]any {
	p := j.params.sample
	type bias struct {
		Bias  *float64 `json:"bias"` // null: banned (-Inf), as llama-server writes it
		Token int      `json:"token"`
	}
	biases := []bias{}
	for id, b := range p.Bias {
		v := b
		e := bias{Token: id, Bias: &v}
		if math.IsInf(b, -1) {
			e.Bias = nil
		}
		biases = append(biases, e)
	}
	sort.Slice(biases, func(a, b int) bool { return biases[a].Token < biases[b].Token })
	stops := j.params.stops.words
	if stops == nil {
		stops = []string{}
	}
	return map[string]any{
		"n_ctx": s.nctx, "model": s.cfg.ModelName, "seed": p.Seed,
		"temperature": p.Temp, "top_k": p.TopK, "top_p": p.TopP, "min_p": p.MinP,
		"repeat_last_n": p.RepeatLastN, "repeat_penalty": p.RepeatPenalty,
		"presence_penalty": 0.0, "frequency_penalty": 0.0, "mirostat": 0, "typical_p": 1.0,
		"n_predict": opt.nPredict, "max_tokens": opt.nPredict, "n_keep": j.params.keep, "stop": stops,
		"ignore_eos": req.IgnoreEOS, "stream": req.Stream, "logit_bias": biases, "n_probs": opt.nProbs,
		"grammar": opt.grammar, "samplers": opt.samplers, "cache_prompt": j.params.cache,
		"speculative.n_max": j.params.spec.nmax, "speculative.n_min": j.params.spec.nmin, "speculative.p_min": j.params.spec.pmin,
	}
}

// nativeAuth is auth with llama-server's error: the same key, checked the
// same way.
func (s *Server) nativeAuth(h http.HandlerFunc) http.HandlerFunc {
	if s.cfg.APIKey == "" {
		return h
	}
	want := []byte("Bearer " + s.cfg.APIKey)
	return func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			s.nativeFail(w, &apiError{Status: http.StatusUnauthorized, Message: "Invalid API Key: send \"Authorization: Bearer KEY\""})
			return
		}
		h(w, r)
	}
}

// nativeErrorBody is an error as llama-server writes it: its HTTP status
// as the code, the message, and llama-server's type for the status.
func nativeErrorBody(e *apiError) map[string]any {
	typ := "invalid_request_error"
	switch {
	case e.Code != nil && *e.Code == "context_length_exceeded":
		typ = "exceed_context_size_error"
	case e.Status == http.StatusUnauthorized:
		typ = "authentication_error"
	case e.Status == http.StatusNotFound:
		typ = "not_found_error"
	case e.Status == http.StatusServiceUnavailable:
		typ = "unavailable_error"
	case e.Status >= 500:
		typ = "server_error"
	}
	return map[string]any{"code": e.Status, "message": e.Message, "type": typ}
}

// nativeFail writes an error found by the shared code in llama-server's
// shape.
func (s *Server) nativeFail(w http.ResponseWriter, e *apiError) {
	writeJSON(w, e.Status, map[string]any{"error": nativeErrorBody(e)})
}
