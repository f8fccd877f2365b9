package server

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Each bad input gets its 4xx error in OpenAI's shape, and the server keeps
// answering afterwards.
func TestBadInputs(t *testing.T) {
	_, url := start(t, Config{MaxBodyBytes: 64 << 10})
	long := strings.Repeat("To be, or not to be, that is the question. ", 100) // well over 512 tokens
	cases := []struct {
		name, path, body  string
		status            int
		param, code, text string
	}{
		{"malformed JSON", "/v1/chat/completions", `{"messages": [`, 400, "", "", "not valid JSON"},
		{"not an object", "/v1/completions", `[1, 2]`, 400, "", "", "must be a JSON object"},
		{"empty body", "/v1/completions", ``, 400, "", "", "must be a JSON object"},
		{"trailing garbage", "/v1/completions", `{"prompt":"a"} x`, 400, "", "", "not valid JSON"},
		{"max_tokens a string", "/v1/completions", `{"prompt":"a","max_tokens":"ten"}`, 400, "max_tokens", "invalid_type", `invalid type for "max_tokens": expected an integer, got a string`},
		{"max_tokens fractional", "/v1/completions", `{"prompt":"a","max_tokens":1.5}`, 400, "max_tokens", "invalid_type", "expected an integer"},
		{"temperature a string", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"temperature":"hot"}`, 400, "temperature", "invalid_type", "expected a number"},
		{"stream a string", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"stream":"yes"}`, 400, "stream", "invalid_type", "expected a boolean"},
		{"messages an object", "/v1/chat/completions", `{"messages":{"role":"user"}}`, 400, "messages", "invalid_type", "expected an array"},
		{"content a number", "/v1/chat/completions", `{"messages":[{"role":"user","content":5}]}`, 400, "messages", "invalid_type", "content must be a string"},
		{"image content", "/v1/chat/completions", `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}`, 400, "messages", "invalid_type", "only text content parts"},
		{"stop a number", "/v1/completions", `{"prompt":"a","stop":7}`, 400, "stop", "invalid_type", "stop must be a string"},
		{"prompt an object", "/v1/completions", `{"prompt":{"text":"a"}}`, 400, "prompt", "invalid_type", "prompt must be"},
		{"seed a string", "/v1/completions", `{"prompt":"a","seed":"x"}`, 400, "seed", "invalid_type", "expected an integer"},
		{"unknown model", "/v1/chat/completions", `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`, 404, "model", "model_not_found", `"gpt-4o" does not exist`},
		{"prompt longer than the context", "/v1/completions", `{"prompt":"` + long + `"}`, 400, "prompt", "context_length_exceeded", "the context is 512 tokens"},
		{"chat longer than the context", "/v1/chat/completions", `{"messages":[{"role":"user","content":"` + long + `"}]}`, 400, "messages", "context_length_exceeded", "the context is 512 tokens"},
		{"huge max_tokens", "/v1/completions", `{"prompt":"ROMEO:","max_tokens":1000000}`, 400, "max_tokens", "context_length_exceeded", "at most 510 can be generated"},
		{"max_tokens zero", "/v1/completions", `{"prompt":"a","max_tokens":0}`, 400, "max_tokens", "invalid_value", "at least 1"},
		{"negative max_tokens", "/v1/completions", `{"prompt":"a","max_tokens":-5}`, 400, "max_tokens", "invalid_value", "at least 1"},
		{"temperature out of range", "/v1/completions", `{"prompt":"a","temperature":3}`, 400, "temperature", "invalid_value", "between 0 and 2"},
		{"top_p zero", "/v1/completions", `{"prompt":"a","top_p":0}`, 400, "top_p", "invalid_value", "top_p"},
		{"repeat_last_n below -1", "/v1/completions", `{"prompt":"a","repeat_last_n":-2}`, 400, "repeat_last_n", "invalid_value", "0 for none or -1 for all"},
		{"top_k negative", "/v1/completions", `{"prompt":"a","top_k":-1}`, 400, "top_k", "invalid_value", "top_k -1"},
		{"n of 2", "/v1/completions", `{"prompt":"a","n":2}`, 400, "n", "invalid_value", "n must be 1"},
		{"presence penalty", "/v1/completions", `{"prompt":"a","presence_penalty":0.5}`, 400, "presence_penalty", "unsupported_value", "not supported"},
		{"five stops", "/v1/completions", `{"prompt":"a","stop":["a","b","c","d","e"]}`, 400, "stop", "invalid_value", "at most 4"},
		{"no prompt", "/v1/completions", `{"max_tokens":3}`, 400, "prompt", "missing_field", "prompt is required"},
		{"token id out of range", "/v1/completions", `{"prompt":[1, 99999]}`, 400, "prompt", "invalid_value", "outside the vocabulary"},
		{"no messages", "/v1/chat/completions", `{"messages":[]}`, 400, "messages", "invalid_value", "non-empty"},
		{"bad role", "/v1/chat/completions", `{"messages":[{"role":"wizard","content":"hi"}]}`, 400, "messages", "invalid_value", `not "wizard"`},
		{"missing content", "/v1/chat/completions", `{"messages":[{"role":"user"}]}`, 400, "messages", "invalid_value", "content is required"},
		{"body too large", "/v1/completions", `{"prompt":"` + strings.Repeat("a", 70<<10) + `"}`, 413, "", "request_too_large", "larger than the limit of 65536 bytes"},
		{"detokenize bad id", "/detokenize", `{"tokens":[1,-3]}`, 400, "tokens", "invalid_value", "token id -3"},
		{"detokenize wrong type", "/detokenize", `{"tokens":"abc"}`, 400, "tokens", "invalid_type", "expected an array"},
		{"tokenize no content", "/tokenize", `{}`, 400, "content", "missing_field", "content is required"},
		{"unknown endpoint", "/v1/images/generations", `{}`, 404, "", "not_found", "no endpoint POST /v1/images/generations"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out := post(t, url+c.path, c.body)
			require.Equal(t, c.status, code, out)
			e, ok := out["error"].(map[string]any)
			require.True(t, ok, "no error object: %v", out)
			require.Len(t, e, 4, "error has message, type, param, code")
			require.Contains(t, e["message"], c.text)
			require.Equal(t, "invalid_request_error", e["type"])
			if c.param == "" {
				require.Nil(t, e["param"])
			} else {
				require.Equal(t, c.param, e["param"])
			}
			if c.code == "" {
				require.Nil(t, e["code"])
			} else {
				require.Equal(t, c.code, e["code"])
			}
		})
	}
	resp, err := http.Get(url + "/v1/completions")
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, 405, resp.StatusCode)
	require.Contains(t, string(b), `"code":"method_not_allowed"`)

	// Still serving; llama.cpp's repeat_last_n 0 (none) and -1 (all) are valid.
	code, out := post(t, url+"/v1/completions", `{"prompt":"ROMEO:","max_tokens":4}`)
	require.Equal(t, 200, code, out)
	for _, n := range []string{"0", "-1"} {
		code, out = post(t, url+"/v1/completions", `{"prompt":"ROMEO:","max_tokens":2,"repeat_penalty":1.3,"repeat_last_n":`+n+`}`)
		require.Equal(t, 200, code, out)
	}
}

func TestBadAPIKey(t *testing.T) {
	_, url := start(t, Config{APIKey: "sekret"})
	for _, h := range [][]string{nil, {"Authorization", "Bearer wrong"}, {"Authorization", "sekret"}} {
		for _, path := range []string{"/v1/chat/completions", "/v1/completions", "/tokenize", "/detokenize"} {
			code, out := post(t, url+path, `{"prompt":"a"}`, h...)
			require.Equal(t, 401, code)
			e := out["error"].(map[string]any)
			require.Equal(t, "invalid_api_key", e["code"])
			require.Equal(t, "invalid_request_error", e["type"])
		}
		req, _ := http.NewRequest("GET", url+"/metrics", nil)
		if h != nil {
			req.Header.Set(h[0], h[1])
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, 401, resp.StatusCode)
	}
}
