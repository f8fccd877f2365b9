package server

import (
	"bytes"
	"encoding/json"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/pinfer/pinfer/engine"
)

// samplingFields are the request fields shared by chat and completions:
// OpenAI's, plus llama.cpp's top_k, min_p and repeat penalty. Pointers tell
// an absent field from a zero one.
type samplingFields struct {
	Model            string         `json:"model"`
	Stream           bool           `json:"stream"`
	StreamOptions    *streamOptions `json:"stream_options"`
	MaxTokens        *int           `json:"max_tokens"`
	MaxCompletion    *int           `json:"max_completion_tokens"`
	N                *int           `json:"n"`
	Temperature      *float64       `json:"temperature"`
	TopP             *float64       `json:"top_p"`
	TopK             *int           `json:"top_k"`
	MinP             *float64       `json:"min_p"`
	RepeatPenalty    *float64       `json:"repeat_penalty"`
	RepeatLastN      *int           `json:"repeat_last_n"`
	FrequencyPenalty *float64       `json:"frequency_penalty"`
	PresencePenalty  *float64       `json:"presence_penalty"`
	Seed             *int64         `json:"seed"`
	Stop             stopField      `json:"stop"`
	// CachePrompt is llama-server's: reuse the slot's cache for what the
	// prompt shares with the slot's last one (default true).
	CachePrompt *bool `json:"cache_prompt"`
	// NKeep is llama-server's n_keep: the prompt tokens after BOS that a
	// context shift keeps (-1: all of them); with --context-shift only.
	NKeep *int `json:"n_keep"`
	// LogitBias is added to tokens' logits before sampling: OpenAI's
	// {"id": bias} or llama-server's [[id or text, bias or false], ...].
	LogitBias logitBiasField `json:"logit_bias"`

	// Ask for more in the response than text (outputs checks them).
	Logprobs    logprobsField `json:"logprobs"`
	TopLogprobs *int          `json:"top_logprobs"`
	Echo        bool          `json:"echo"`

	// Ask for what this server does not give: refused unless off, so that
	// a client never takes a plain answer for the one it asked for.
	Suffix     string            `json:"suffix"`
	Tools      []json.RawMessage `json:"tools"`
	Functions  []json.RawMessage `json:"functions"`
	ToolChoice json.RawMessage   `json:"tool_choice"`
	// Tools, ToolChoice and ParallelToolCalls are read by chat (tools.go),
	// which takes them out before the check.
	ParallelToolCalls *bool `json:"parallel_tool_calls"`

	// Constrain the text (constraint.go): llama-server's grammar (GBNF)
	// and json_schema, or OpenAI's response_format.
	Grammar        *string         `json:"grammar"`
	JSONSchema     json.RawMessage `json:"json_schema"`
	ResponseFormat *responseFormat `json:"response_format"`

	// llama-server's speculative decoding settings (speculative.go).
	SpecNMax *int     `json:"speculative.n_max"`
	SpecNMin *int     `json:"speculative.n_min"`
	SpecPMin *float64 `json:"speculative.p_min"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type chatRequest struct {
	samplingFields
	Messages []chatMessage `json:"messages"`
}

type chatMessage struct {
	Role    string       `json:"role"`
	Content contentField `json:"content"`
	Name    string       `json:"name"`
	// An assistant message's calls, and a tool message's answer to one (tools.go).
	ToolCalls  json.RawMessage `json:"tool_calls"`
	ToolCallID string          `json:"tool_call_id"`
}

type completionRequest struct {
	samplingFields
	Prompt promptField `json:"prompt"`
}

// fieldError is a wrong-typed value found by a custom decoder; param names it.
type fieldError struct{ param, msg string }

func (e *fieldError) Error() string { return e.msg }

func isNull(b []byte) bool { return string(bytes.TrimSpace(b)) == "null" }

// stopField is "stop": a string, a list of strings, or null.
type stopField []string

func (s *stopField) UnmarshalJSON(b []byte) error {
	if isNull(b) {
		*s = nil
		return nil
	}
	var one string
	if json.Unmarshal(b, &one) == nil {
		*s = stopField{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return &fieldError{"stop", "stop must be a string or an array of strings"}
	}
	*s = many
	return nil
}

// logitBiasField is "logit_bias": OpenAI's object of token ids (as
// strings) to biases, or llama-server's array of [token, bias] pairs; in
// both llama-server also takes a text for the token, meaning each token
// of its tokenization, and false for the bias, which bans the token.
type logitBiasField []logitBias

type logitBias struct {
	id     int
	text   string // the token given as a text: resolved by the server's tokenizer
	isText bool   // text names the tokens (an empty one none), not id
	bias   float64
}

func (l *logitBiasField) UnmarshalJSON(b []byte) error {
	*l = nil
	if isNull(b) {
		return nil
	}
	bad := &fieldError{"logit_bias", `logit_bias must be an object {"token id": bias} or an array of [token id or text, bias or false] pairs`}
	value := func(raw json.RawMessage) (float64, bool) {
		var v float64
		if json.Unmarshal(raw, &v) == nil {
			return v, true
		}
		var on bool
		if json.Unmarshal(raw, &on) == nil && !on {
			return math.Inf(-1), true // false bans the token
		}
		return 0, false
	}
	key := func(k string) logitBias {
		if id, err := strconv.Atoi(k); err == nil {
			return logitBias{id: id}
		}
		return logitBias{id: -1, text: k, isText: true}
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(b, &obj) == nil {
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		sort.Strings(keys) // a stable order for the error messages
		for _, k := range keys {
			e := key(k)
			var ok bool
			if e.bias, ok = value(obj[k]); !ok {
				return bad
			}
			*l = append(*l, e)
		}
		return nil
	}
	var pairs [][]json.RawMessage
	if err := json.Unmarshal(b, &pairs); err != nil {
		return bad
	}
	for _, p := range pairs {
		if len(p) != 2 {
			return bad
		}
		var e logitBias
		var id int
		var text string
		switch {
		case json.Unmarshal(p[0], &id) == nil:
			e.id = id
		case json.Unmarshal(p[0], &text) == nil:
			e = logitBias{id: -1, text: text, isText: true}
		default:
			return bad
		}
		var ok bool
		if e.bias, ok = value(p[1]); !ok {
			return bad
		}
		*l = append(*l, e)
	}
	return nil
}

// logprobsField is "logprobs": chat's boolean or the completions' count of
// top tokens, where 0, as false, asks for none.
type logprobsField struct {
	on    bool
	isNum bool // given as a number: n
	n     int
}

func (l *logprobsField) UnmarshalJSON(b []byte) error {
	*l = logprobsField{}
	switch {
	case isNull(b):
	case json.Unmarshal(b, &l.on) == nil:
	case json.Unmarshal(b, &l.n) == nil:
		l.on, l.isNum = l.n != 0, true
	default:
		return &fieldError{"logprobs", "logprobs must be a boolean or an integer"}
	}
	return nil
}

// contentField is a message's content: a string, a list of parts (of which
// only text parts are supported, joined by newlines), or null.
type contentField struct {
	text  string
	isSet bool
}

func (c *contentField) UnmarshalJSON(b []byte) error {
	if isNull(b) {
		*c = contentField{}
		return nil
	}
	if json.Unmarshal(b, &c.text) == nil {
		c.isSet = true
		return nil
	}
	var parts []struct {
		Type string  `json:"type"`
		Text *string `json:"text"`
	}
	if err := json.Unmarshal(b, &parts); err != nil {
		return &fieldError{"messages", "message content must be a string or an array of content parts"}
	}
	var texts []string
	for _, p := range parts {
		if p.Type != "text" || p.Text == nil {
			return &fieldError{"messages", "only text content parts are supported, got type " + quote(p.Type)}
		}
		texts = append(texts, *p.Text)
	}
	c.text, c.isSet = strings.Join(texts, "\n"), true
	return nil
}

// promptField is a completion prompt: a string, a list of one string, or a
// list of token ids (used as they are, without BOS), alone or in a list of
// one.
type promptField struct {
	text   string
	tokens []int
	isSet  bool
}

func (p *promptField) UnmarshalJSON(b []byte) error {
	if isNull(b) {
		*p = promptField{}
		return nil
	}
	p.isSet = true
	if json.Unmarshal(b, &p.text) == nil {
		return nil
	}
	var texts []string
	if json.Unmarshal(b, &texts) == nil {
		if len(texts) != 1 {
			return &fieldError{"prompt", "prompt: only one prompt per request is supported"}
		}
		p.text = texts[0]
		return nil
	}
	var batch [][]int // one prompt of ids in a batch of one, as lm-evaluation-harness sends it
	if json.Unmarshal(b, &batch) == nil && len(batch) > 0 {
		if len(batch) != 1 {
			return &fieldError{"prompt", "prompt: only one prompt per request is supported"}
		}
		b, _ = json.Marshal(batch[0])
	}
	if err := json.Unmarshal(b, &p.tokens); err != nil || len(p.tokens) == 0 {
		return &fieldError{"prompt", "prompt must be a string, an array of one string, or a non-empty array of token ids (or an array of one such array)"}
	}
	return nil
}

func quote(s string) string { b, _ := json.Marshal(s); return string(b) }

// Responses.

type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
	// As OpenAI reports the prompt's tokens served from its cache.
	PromptDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

func newUsage(prompt, completion int, t timings) *usage {
	u := &usage{PromptTokens: prompt, CompletionTokens: completion, TotalTokens: prompt + completion}
	u.PromptDetails.CachedTokens = t.CacheN
	return u
}

// timings are llama.cpp's server timings of one request: run's, without
// the load time.
type timings = engine.Timings

type chatChoice struct {
	Index        int      `json:"index"`
	Message      any      `json:"message,omitempty"` // *chatOut, or *toolMessage (tools.go)
	Delta        *chatOut `json:"delta,omitempty"`
	Text         *string  `json:"text,omitempty"`
	Logprobs     any      `json:"logprobs"` // *legacyLogprobs, *chatLogprobs or null
	FinishReason *string  `json:"finish_reason"`
}

type chatOut struct {
	Role      string     `json:"role,omitempty"`
	Content   *string    `json:"content,omitempty"`
	ToolCalls []toolCall `json:"tool_calls,omitempty"` // a stream's deltas (tools.go)
}

// completion is every response body and stream chunk of both endpoints;
// Object tells them apart.
type completion struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []chatChoice `json:"choices"`
	Usage   *usage       `json:"usage,omitempty"`
	Timings *timings     `json:"timings,omitempty"`
}
