package server

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

const builtinCtx = 512 // the built-in model's context, which each slot gets

func finishReason(out map[string]any) string {
	return out["choices"].([]any)[0].(map[string]any)["finish_reason"].(string)
}

func usageOf(out map[string]any) (prompt, completion int) {
	u := out["usage"].(map[string]any)
	return int(u["prompt_tokens"].(float64)), int(u["completion_tokens"].(float64))
}

// -n is a default, as in llama-server: when it is more than the context
// leaves after the prompt, a request without max_tokens generates until the
// context is full, as with -n -1, instead of being refused. A max_tokens the
// client asks for and cannot have is still a 400.
func TestDefaultMaxTokensLargerThanContext(t *testing.T) {
	_, big := start(t, Config{DefaultMaxTokens: 1000})
	_, full := start(t, Config{}) // -n -1: until the context is full
	for _, c := range []struct{ path, body string }{
		{"/v1/completions", `{"prompt":"ROMEO:","temperature":0}`},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"Who art thou?"}],"temperature":0}`},
	} {
		code, out := post(t, big+c.path, c.body)
		require.Equal(t, 200, code, "%s: %v", c.path, out)
		p, n := usageOf(out)
		require.Equal(t, "length", finishReason(out), c.path)
		require.GreaterOrEqual(t, p+n, builtinCtx, "%s: ends at a full context", c.path)
		code, want := post(t, full+c.path, c.body)
		require.Equal(t, 200, code, want)
		require.Equal(t, completionText(t, want), completionText(t, out), c.path)
		require.Equal(t, want["usage"], out["usage"], c.path)
	}

	code, out := post(t, big+"/v1/completions", `{"prompt":"ROMEO:","max_tokens":5,"temperature":0}`)
	require.Equal(t, 200, code, out)
	_, n := usageOf(out)
	require.Equal(t, 5, n)
	for _, name := range []string{"max_tokens", "max_completion_tokens"} {
		code, out = post(t, big+"/v1/completions", `{"prompt":"ROMEO:","`+name+`":1000}`)
		require.Equal(t, 400, code, out)
		e := out["error"].(map[string]any)
		require.Equal(t, "context_length_exceeded", e["code"])
		require.Equal(t, name, e["param"]) // the field the client sent
		require.Contains(t, e["message"], name+" is too large")
	}

	// As many as a full context gives can be asked for, and no more.
	code, out = post(t, full+"/v1/completions", `{"prompt":"ROMEO:","temperature":0}`)
	require.Equal(t, 200, code, out)
	_, most := usageOf(out)
	code, out = post(t, big+"/v1/completions", fmt.Sprintf(`{"prompt":"ROMEO:","temperature":0,"max_tokens":%d}`, most))
	require.Equal(t, 200, code, out)
	_, n = usageOf(out)
	require.Equal(t, most, n)
	code, out = post(t, big+"/v1/completions", fmt.Sprintf(`{"prompt":"ROMEO:","max_tokens":%d}`, most+1))
	require.Equal(t, 400, code, out)
	require.Contains(t, out["error"].(map[string]any)["message"], fmt.Sprintf("at most %d can be generated", most))

	// A default that fits is used as it is.
	_, small := start(t, Config{DefaultMaxTokens: 7})
	code, out = post(t, small+"/v1/completions", `{"prompt":"ROMEO:","temperature":0}`)
	require.Equal(t, 200, code, out)
	_, n = usageOf(out)
	require.Equal(t, 7, n)
	require.Equal(t, "length", finishReason(out))
}

// Seed -1 is llama.cpp's random seed, as an absent seed is: requests give
// different texts where a fixed seed gives one text each time. Other
// negative seeds are refused.
func TestSeedMinusOneIsRandom(t *testing.T) {
	_, url := start(t, Config{})
	texts := func(seed string) map[string]bool {
		seen := map[string]bool{}
		for range 3 {
			code, out := post(t, url+"/v1/completions", `{"prompt":"ROMEO:","max_tokens":32,"temperature":1.5`+seed+`}`)
			require.Equal(t, 200, code, out)
			seen[completionText(t, out)] = true
		}
		return seen
	}
	require.Len(t, texts(`,"seed":7`), 1, "a fixed seed repeats its text")
	require.Greater(t, len(texts(`,"seed":-1`)), 1, "seed -1 is random")
	require.Greater(t, len(texts(``)), 1, "no seed is random")

	for _, seed := range []string{"-2", "-1000"} {
		code, out := post(t, url+"/v1/completions", `{"prompt":"ROMEO:","max_tokens":2,"seed":`+seed+`}`)
		require.Equal(t, 400, code, out)
		e := out["error"].(map[string]any)
		require.Equal(t, "seed", e["param"])
		require.Equal(t, "invalid_value", e["code"])
		require.Contains(t, e["message"], "seed")
	}
}

// Fields that ask for something in the response this server does not give
// are refused, like n and the OpenAI penalties, rather than ignored; their
// off values are accepted. (logprobs and echo: logprobs_test.go.)
func TestUnsupportedResponseFieldsRefused(t *testing.T) {
	_, url := start(t, Config{})
	const (
		chat = "/v1/chat/completions"
		cmpl = "/v1/completions"
		msgs = `"messages":[{"role":"user","content":"hi"}],"max_tokens":2`
		prm  = `"prompt":"ROMEO:","max_tokens":2`
	)
	refused := []struct{ path, fields, param string }{
		{chat, `"echo":true`, "echo"},
		{cmpl, `"top_logprobs":2`, "top_logprobs"},
		{cmpl, `"suffix":"END"`, "suffix"},
		{chat, `"functions":[{"name":"f","parameters":{}}]`, "functions"}, // tools, tool_choice: tools_test.go
		{cmpl, `"n":2`, "n"},
	}
	for _, c := range refused {
		base := map[string]string{chat: msgs, cmpl: prm}[c.path]
		code, out := post(t, url+c.path, "{"+base+","+c.fields+"}")
		require.Equal(t, 400, code, "%s %s: %v", c.path, c.fields, out)
		e := out["error"].(map[string]any)
		require.Equal(t, c.param, e["param"], c.fields)
		require.Equal(t, "invalid_request_error", e["type"], c.fields)
		require.Contains(t, []any{"unsupported_value", "invalid_value"}, e["code"], c.fields)
		require.Contains(t, e["message"], c.param, c.fields)
		if c.param != "n" {
			require.Equal(t, "unsupported_value", e["code"], c.fields)
			require.Contains(t, e["message"], "not supported", c.fields)
		}
	}

	accepted := []struct{ path, fields string }{
		{chat, `"logprobs":false`},
		{chat, `"logprobs":null,"top_logprobs":null`},
		{chat, `"logprobs":false,"top_logprobs":0`},
		{cmpl, `"logprobs":null`},
		{cmpl, `"logprobs":0`},
		{cmpl, `"echo":false`},
		{cmpl, `"suffix":null`},
		{cmpl, `"suffix":""`},
		{chat, `"tools":[]`},
		{chat, `"tools":null,"functions":null`},
		{chat, `"tool_choice":"none"`},
		{chat, `"tool_choice":null`},
		{chat, `"response_format":{"type":"text"}`},
		{chat, `"response_format":null`},
	}
	for _, c := range accepted {
		base := map[string]string{chat: msgs, cmpl: prm}[c.path]
		code, out := post(t, url+c.path, "{"+base+","+c.fields+"}")
		require.Equal(t, 200, code, "%s %s: %v", c.path, c.fields, out)
		require.Nil(t, out["choices"].([]any)[0].(map[string]any)["logprobs"], c.fields)
	}

	// A wrong type is a type error naming the field, as for the others.
	for _, f := range []string{`"logprobs":"yes"`, `"echo":1`, `"tools":"f"`, `"response_format":"json"`} {
		code, out := post(t, url+cmpl, fmt.Sprintf("{%s,%s}", prm, f))
		require.Equal(t, 400, code, "%s: %v", f, out)
		require.Equal(t, "invalid_type", out["error"].(map[string]any)["code"], f)
	}
}
