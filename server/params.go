package server

import (
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"

	"github.com/pinfer/pinfer/grammar"
	"github.com/pinfer/pinfer/sample"
)

// decodeBody reads a JSON object into v, turning every failure into the
// error a client should see: 413 past the size limit, else 400 naming the
// field whose value has the wrong type.
func (s *Server) decodeBody(w http.ResponseWriter, r *http.Request, v any) *apiError {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return &apiError{Status: http.StatusRequestEntityTooLarge, Type: "invalid_request_error", Code: opt("request_too_large"),
				Message: "the request body is larger than the limit of " + strconv.FormatInt(tooBig.Limit, 10) + " bytes"}
		}
		return badRequest("", "", "could not read the request body: %v", err)
	}
	if t := strings.TrimSpace(string(body)); t == "" || t == "null" {
		return badRequest("", "", "the request body must be a JSON object")
	}
	err = json.Unmarshal(body, v)
	var fe *fieldError
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &fe):
		return badRequest(fe.param, "invalid_type", "%s", fe.msg)
	case errors.As(err, &te):
		if te.Field == "" {
			return badRequest("", "", "the request body must be a JSON object, not %s", jsonKind(te.Value))
		}
		field := strings.TrimPrefix(te.Field, "samplingFields.") // the embedded struct is no part of the API
		return badRequest(field, "invalid_type", "invalid type for %s: expected %s, got %s", quote(field), goKind(te.Type.Kind().String()), jsonKind(te.Value))
	case errors.As(err, &se):
		return badRequest("", "", "the request body is not valid JSON: %v (at byte %d)", se, se.Offset)
	}
	return badRequest("", "", "the request body is not valid JSON: %v", err)
}

func jsonKind(v string) string {
	switch {
	case v == "object", v == "array":
		return "an " + v
	case v == "bool":
		return "a boolean"
	case v == "string", strings.HasPrefix(v, "number"):
		return "a " + v
	}
	return v
}

func goKind(k string) string {
	switch {
	case strings.HasPrefix(k, "int"):
		return "an integer"
	case strings.HasPrefix(k, "float"):
		return "a number"
	case k == "bool":
		return "a boolean"
	case k == "string":
		return "a string"
	case k == "slice":
		return "an array"
	}
	return "an object"
}

// checkModel accepts the served name, the file's name, or none at all.
func (s *Server) checkModel(name string) *apiError {
	if name == "" || name == s.cfg.ModelName || name == s.fileName {
		return nil
	}
	return &apiError{Status: http.StatusNotFound, Type: "invalid_request_error", Param: opt("model"), Code: opt("model_not_found"),
		Message: "The model " + quote(name) + " does not exist: this server serves " + quote(s.cfg.ModelName)}
}

// genParams is what a slot needs to run one request.
type genParams struct {
	sample    sample.Params
	maxTokens int // -1: until the context is full
	// maxName: the field the client set maxTokens by, which must then fit;
	// "" for the server's -n, a default that, as in llama-server, stops at
	// a full context rather than refuse a request that sets none.
	maxName string
	stops   stopWords
	cache   bool // reuse the slot's cached prefix
	keep    int  // n_keep: the prompt tokens after BOS a context shift keeps (-1: all)

	grammar *grammar.Grammar // the text must match it (constraint.go); nil: free
	tools   *toolPlan        // the reply is parsed for tool calls (tools.go); nil: text
	spec    specParams       // speculative decoding, with a draft model (speculative.go)

	logprobs bool // report each token's log-probability (logprobs.go)
	topN     int  // and the topN likeliest tokens at its position
	echo     bool // the prompt's text comes first (completions' echo)
}

// promptLogprobs says the prompt's tokens are reported too (echo with
// logprobs), which needs the logits of every prompt position.
func (g *genParams) promptLogprobs() bool { return g.echo && g.logprobs }

// sampling validates the fields and fills in llama.cpp's defaults for the
// absent ones.
func (s *Server) sampling(f *samplingFields) (genParams, *apiError) {
	g := genParams{sample: sample.Defaults(), maxTokens: s.cfg.DefaultMaxTokens, cache: f.CachePrompt == nil || *f.CachePrompt}
	p := &g.sample
	if f.N != nil && *f.N != 1 {
		return g, badRequest("n", "invalid_value", "n must be 1: one choice per request is supported")
	}
	for name, v := range map[string]*float64{"frequency_penalty": f.FrequencyPenalty, "presence_penalty": f.PresencePenalty} {
		if v != nil && *v != 0 {
			return g, badRequest(name, "unsupported_value", "%s is not supported (use repeat_penalty)", name)
		}
	}
	e := unsupported(f)
	if e != nil {
		return g, e
	}
	if f.Temperature != nil {
		if *f.Temperature < 0 || *f.Temperature > 2 {
			return g, badRequest("temperature", "invalid_value", "temperature must be between 0 and 2")
		}
		p.Temp = *f.Temperature
	}
	if f.TopP != nil {
		p.TopP = *f.TopP
	}
	if f.TopK != nil {
		p.TopK = *f.TopK
	}
	if f.MinP != nil {
		p.MinP = *f.MinP
	}
	if f.RepeatPenalty != nil {
		p.RepeatPenalty = *f.RepeatPenalty
	}
	if f.RepeatLastN != nil {
		p.RepeatLastN = *f.RepeatLastN
	}
	if p.Bias, e = s.logitBias(f.LogitBias); e != nil {
		return g, e
	}
	var pe *sample.ParamError
	if errors.As(p.Check(), &pe) {
		return g, badRequest(pe.Name, "invalid_value", "%s", pe)
	}
	switch {
	case f.Seed == nil || *f.Seed == -1: // llama.cpp's -1: a random seed
		p.Seed = rand.Uint64()
	case *f.Seed < 0:
		return g, badRequest("seed", "invalid_value", "seed must be -1 for a random seed, or 0 or more, not %d", *f.Seed)
	default:
		p.Seed = uint64(*f.Seed)
	}
	mt, name := f.MaxTokens, "max_tokens"
	if mt == nil {
		mt, name = f.MaxCompletion, "max_completion_tokens"
	}
	if mt != nil {
		// 0 with echo scores the prompt and generates nothing, as
		// OpenAI's and llama-server's (lm-evaluation-harness asks so).
		if *mt < 1 && !(*mt == 0 && f.Echo) {
			return g, badRequest(name, "invalid_value", "%s must be at least 1 (or 0 with echo)", name)
		}
		g.maxTokens, g.maxName = *mt, name
	}
	if f.NKeep != nil {
		if !s.cfg.ContextShift {
			return g, badRequest("n_keep", "unsupported_value", "n_keep says what a context shift keeps, and this server does not shift (start it with --context-shift)")
		}
		if *f.NKeep < -1 {
			return g, badRequest("n_keep", "invalid_value", "n_keep must be -1 (the whole prompt) or a count of tokens, not %d", *f.NKeep)
		}
		g.keep = *f.NKeep
	}
	if g.grammar, e = constraint(f); e != nil {
		return g, e
	}
	if len(f.Stop) > 4 {
		return g, badRequest("stop", "invalid_value", "stop takes at most 4 strings")
	}
	for _, st := range f.Stop {
		if st != "" {
			g.stops.words = append(g.stops.words, st)
		}
	}
	g.spec = s.speculative(f)
	return g, nil
}

// logitBias turns logit_bias into the sampler's: a token given as a text
// is each token of its tokenization (without BOS), as llama-server reads
// it; biases of one token add up.
func (s *Server) logitBias(l logitBiasField) (map[int]float64, *apiError) {
	if len(l) == 0 {
		return nil, nil
	}
	out := make(map[int]float64, len(l))
	for _, b := range l {
		ids := []int{b.id}
		if b.isText {
			// As llama-server: each token of the text (none for "").
			ids = s.model.Tok.Encode(b.text, false)
		}
		for _, id := range ids {
			if id < 0 || id >= s.model.Tok.Size() {
				return nil, badRequest("logit_bias", "invalid_value", "logit_bias: token id %d is outside the vocabulary of %d", id, s.model.Tok.Size())
			}
			out[id] += b.bias
		}
	}
	return out, nil
}

// unsupported refuses the fields that ask for more in the response than
// its text, when they are on.
func unsupported(f *samplingFields) *apiError {
	var choice string
	json.Unmarshal(f.ToolChoice, &choice) // "none" is the one choice allowed
	for _, c := range []struct {
		name string
		on   bool
	}{
		{"suffix", f.Suffix != ""},
		{"tools", len(f.Tools) > 0},
		{"functions", len(f.Functions) > 0},
		{"tool_choice", f.ToolChoice != nil && !isNull(f.ToolChoice) && choice != "none"},
	} {
		if c.on {
			return badRequest(c.name, "unsupported_value", "%s is not supported", c.name)
		}
	}
	return nil
}

// outputs validates what the response carries beside the text: logprobs
// and, for completions, echo. The chat endpoint takes logprobs as a boolean
// and top_logprobs as the count of alternatives; completions take logprobs
// as that count (0: none, as llama-server's n_probs) and no top_logprobs.
func outputs(g *genParams, f *samplingFields, chat bool) *apiError {
	lp := f.Logprobs
	rangeErr := func(name string, n int) *apiError {
		return badRequest(name, "invalid_value", "%s must be between 0 and %d, not %d", name, maxTopLogprobs, n)
	}
	if chat {
		if f.Echo {
			return badRequest("echo", "unsupported_value", "echo is not supported on /v1/chat/completions (it is a field of /v1/completions)")
		}
		if lp.isNum && lp.n != 0 {
			return badRequest("logprobs", "invalid_type", "logprobs must be a boolean on /v1/chat/completions (top_logprobs sets how many alternatives)")
		}
		g.logprobs = lp.on
		if t := f.TopLogprobs; t != nil {
			if *t < 0 || *t > maxTopLogprobs {
				return rangeErr("top_logprobs", *t)
			}
			if *t > 0 && !lp.on {
				return badRequest("top_logprobs", "invalid_value", "top_logprobs needs logprobs set to true")
			}
			g.topN = *t
		}
		return nil
	}
	if f.TopLogprobs != nil && *f.TopLogprobs != 0 {
		return badRequest("top_logprobs", "unsupported_value", "top_logprobs is not supported on /v1/completions: logprobs is the number of alternatives there")
	}
	if lp.on && !lp.isNum {
		return badRequest("logprobs", "invalid_type", "logprobs must be an integer from 0 to %d on /v1/completions, not true", maxTopLogprobs)
	}
	if lp.n < 0 || lp.n > maxTopLogprobs {
		return rangeErr("logprobs", lp.n)
	}
	g.logprobs, g.topN, g.echo = lp.n > 0, lp.n, f.Echo
	if g.promptLogprobs() {
		// Scoring the prompt needs the logits of each of its positions,
		// which a reused cache has not kept: such a request runs its
		// prompt whole (and the slot keeps it for later requests).
		g.cache = false
	}
	return nil
}

// fit checks a tokenized prompt and max_tokens against the slot context.
func (s *Server) fit(g *genParams, nPrompt int, promptParam string) *apiError {
	if g.maxTokens == 0 && nPrompt <= s.nctx {
		return nil // the prompt is scored, nothing generated
	}
	if nPrompt >= s.nctx {
		return badRequest(promptParam, "context_length_exceeded",
			"the prompt has %d tokens but the context is %d tokens (at least one must be left to generate)", nPrompt, s.nctx)
	}
	// The last token is sampled from the last position's logits and never
	// stored, so a full context gives one token more than it has room for.
	most := s.nctx - nPrompt + 1
	if g.maxTokens > most && !(s.cfg.ContextShift && g.maxName != "") {
		if g.maxName == "" {
			g.maxTokens = -1
			return nil
		}
		return badRequest(g.maxName, "context_length_exceeded",
			"%s is too large: %d, the prompt has %d tokens and the context is %d, so at most %d can be generated",
			g.maxName, g.maxTokens, nPrompt, s.nctx, most)
	}
	return nil
}
