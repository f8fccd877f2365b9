package server

import (
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"

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
	stops   []string
	cache   bool // reuse the slot's cached prefix
}

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
	if e := unsupported(f); e != nil {
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
		if *mt < 1 {
			return g, badRequest(name, "invalid_value", "%s must be at least 1", name)
		}
		g.maxTokens, g.maxName = *mt, name
	}
	if len(f.Stop) > 4 {
		return g, badRequest("stop", "invalid_value", "stop takes at most 4 strings")
	}
	for _, st := range f.Stop {
		if st != "" {
			g.stops = append(g.stops, st)
		}
	}
	return g, nil
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
		{"logprobs", f.Logprobs.on},
		{"top_logprobs", f.TopLogprobs != nil && *f.TopLogprobs != 0},
		{"echo", f.Echo},
		{"suffix", f.Suffix != ""},
		{"tools", len(f.Tools) > 0},
		{"functions", len(f.Functions) > 0},
		{"tool_choice", f.ToolChoice != nil && !isNull(f.ToolChoice) && choice != "none"},
	} {
		if c.on {
			return badRequest(c.name, "unsupported_value", "%s is not supported", c.name)
		}
	}
	if rf := f.ResponseFormat; rf != nil && rf.Type != "text" {
		return badRequest("response_format", "unsupported_value", "response_format of type %s is not supported: only \"text\"", quote(rf.Type))
	}
	return nil
}

// fit checks a tokenized prompt and max_tokens against the slot context.
func (s *Server) fit(g *genParams, nPrompt int, promptParam string) *apiError {
	if nPrompt >= s.nctx {
		return badRequest(promptParam, "context_length_exceeded",
			"the prompt has %d tokens but the context is %d tokens (at least one must be left to generate)", nPrompt, s.nctx)
	}
	// The last token is sampled from the last position's logits and never
	// stored, so a full context gives one token more than it has room for.
	most := s.nctx - nPrompt + 1
	if g.maxTokens > most {
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
