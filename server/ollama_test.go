package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const ollamaModelName = "shakespeare-relu-6m-f16"

// ollamaStream posts a request whose answer is streamed and returns its
// NDJSON lines, checking the framing: one JSON object a line, done false
// on each but the last.
func ollamaStream(t *testing.T, ctx context.Context, url, body string, headers ...string) []map[string]any {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(body))
	require.NoError(t, err)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	require.Equal(t, "application/x-ndjson", resp.Header.Get("Content-Type"))
	var lines []map[string]any
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var o map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &o), "line %q", sc.Text())
		lines = append(lines, o)
	}
	require.NoError(t, sc.Err())
	require.NotEmpty(t, lines)
	for _, l := range lines[:len(lines)-1] {
		require.Equal(t, false, l["done"], "%v", l)
		require.NotContains(t, l, "eval_count")
	}
	return lines
}

// ollamaText is the text of an answer or stream line: response or
// message.content.
func ollamaText(t *testing.T, o map[string]any) string {
	t.Helper()
	if msg, ok := o["message"].(map[string]any); ok {
		require.Equal(t, "assistant", msg["role"])
		return msg["content"].(string)
	}
	return o["response"].(string)
}

func joinOllama(t *testing.T, lines []map[string]any) string {
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(ollamaText(t, l))
	}
	return b.String()
}

// requireFinal checks the last object's fields: done, done_reason, the
// counts, and durations in nanoseconds that add up.
func requireFinal(t *testing.T, o map[string]any, reason string, prompt, eval int) {
	t.Helper()
	require.Equal(t, true, o["done"])
	require.Equal(t, reason, o["done_reason"])
	require.Equal(t, float64(prompt), o["prompt_eval_count"], "prompt_eval_count")
	require.Equal(t, float64(eval), o["eval_count"], "eval_count")
	require.Equal(t, 0.0, o["load_duration"])
	total := o["total_duration"].(float64)
	pd, ed := o["prompt_eval_duration"].(float64), o["eval_duration"].(float64)
	require.Greater(t, pd, 0.0)
	if eval > 1 {
		require.Greater(t, ed, 0.0)
	}
	require.GreaterOrEqual(t, total, pd+ed)
	require.Less(t, total, 60e9, "nanoseconds, not something else")
	require.Equal(t, float64(int64(total)), total, "an integer")
	require.NotEmpty(t, o["created_at"])
}

// At temperature 0, /api/generate with raw is /v1/completions' text (so
// PyTorch's greedy continuation), without raw it is the chat template over
// system and prompt, as /v1/chat/completions gives it, and /api/chat is
// /v1/chat/completions. The counts are the OpenAI side's usage.
func TestOllamaGreedyMatchesOpenAI(t *testing.T) {
	ref := loadReference(t)
	_, url := start(t, Config{})
	for _, p := range ref.Prompts {
		n := len(p.GreedyIDs)
		code, oa := post(t, url+"/v1/completions", mustJSON(map[string]any{"prompt": p.Text, "max_tokens": n, "temperature": 0}))
		require.Equal(t, 200, code, oa)
		code, out := post(t, url+"/api/generate", mustJSON(map[string]any{"model": ollamaModelName, "prompt": p.Text, "raw": true, "stream": false,
			"options": map[string]any{"temperature": 0, "num_predict": n}}))
		require.Equal(t, 200, code, out)
		require.Equal(t, completionText(t, oa), out["response"])
		require.Equal(t, p.GreedyText, strings.TrimPrefix(out["response"].(string), " "))
		require.Equal(t, ollamaModelName, out["model"])
		requireFinal(t, out, "length", len(p.IDs), n)
		require.NotContains(t, out, "message")
	}

	msgs := []map[string]any{{"role": "system", "content": "Speak."}, {"role": "user", "content": "Who art thou?"}}
	code, oa := post(t, url+"/v1/chat/completions", mustJSON(map[string]any{"messages": msgs, "max_tokens": 40, "temperature": 0}))
	require.Equal(t, 200, code, oa)
	want := completionText(t, oa)
	usage := oa["usage"].(map[string]any)
	require.NotEmpty(t, want)

	code, out := post(t, url+"/api/chat", mustJSON(map[string]any{"model": ollamaModelName + ":latest", "messages": msgs, "stream": false,
		"options": map[string]any{"temperature": 0, "num_predict": 40}}))
	require.Equal(t, 200, code, out)
	require.Equal(t, want, ollamaText(t, out))
	require.Equal(t, ollamaModelName+":latest", out["model"], "the name sent comes back")
	requireFinal(t, out, usageReason(oa), int(usage["prompt_tokens"].(float64)), int(usage["completion_tokens"].(float64)))

	code, out = post(t, url+"/api/generate", mustJSON(map[string]any{"model": ollamaModelName, "system": "Speak.", "prompt": "Who art thou?", "stream": false,
		"options": map[string]any{"temperature": 0, "num_predict": 40}}))
	require.Equal(t, 200, code, out)
	require.Equal(t, want, out["response"])
	requireFinal(t, out, usageReason(oa), int(usage["prompt_tokens"].(float64)), int(usage["completion_tokens"].(float64)))
}

func usageReason(oa map[string]any) string {
	return oa["choices"].([]any)[0].(map[string]any)["finish_reason"].(string)
}

// Streaming is the default: the lines' text joins to the whole answer,
// and the last line, with an empty text, carries the counts.
func TestOllamaStreamEqualsWhole(t *testing.T) {
	_, url := start(t, Config{})
	for _, c := range []struct{ path, body string }{
		{"/api/generate", `"prompt":"JULIET:","raw":true`},
		{"/api/generate", `"prompt":"Speak, friend."`},
		{"/api/chat", `"messages":[{"role":"user","content":"Speak, friend."}]`},
	} {
		body := `{"model":"` + ollamaModelName + `",` + c.body + `,"options":{"temperature":0,"num_predict":30}`
		code, whole := post(t, url+c.path, body+`,"stream":false}`)
		require.Equal(t, 200, code, whole)
		lines := ollamaStream(t, context.Background(), url+c.path, body+`}`)
		require.Greater(t, len(lines), 5, "streamed piece by piece")
		last := lines[len(lines)-1]
		require.Equal(t, "", ollamaText(t, last))
		require.Equal(t, ollamaText(t, whole), joinOllama(t, lines), c.path)
		requireFinal(t, last, "length", int(whole["prompt_eval_count"].(float64)), 30)
		if c.path == "/api/chat" {
			require.Contains(t, lines[0], "message")
			require.NotContains(t, lines[0], "response")
		}
	}
}

// A stop string or the end of the text ends the answer with done_reason
// "stop"; ollama's options take more than OpenAI's four stop strings.
func TestOllamaStop(t *testing.T) {
	_, url := start(t, Config{})
	body := `{"model":"` + ollamaModelName + `","prompt":"ROMEO:","raw":true,"stream":false,"options":{"temperature":0,"num_predict":30}}`
	code, whole := post(t, url+"/api/generate", body)
	require.Equal(t, 200, code, whole)
	text := whole["response"].(string)
	require.Contains(t, text, " is")
	stops := `["q1","q2","q3","q4"," is"]`
	code, out := post(t, url+"/api/generate", strings.Replace(body, `"num_predict":30`, `"num_predict":30,"stop":`+stops, 1))
	require.Equal(t, 200, code, out)
	require.Equal(t, text[:strings.Index(text, " is")], out["response"])
	require.Equal(t, "stop", out["done_reason"])
}

// num_ctx below the server's context caps prompt and reply; above it, it
// is ignored; num_predict past the context stops there instead of being
// refused.
func TestOllamaNumCtxAndNumPredict(t *testing.T) {
	s, url := start(t, Config{})
	gen := func(opts string) map[string]any {
		code, out := post(t, url+"/api/generate", `{"model":"`+ollamaModelName+`","prompt":"ROMEO:","raw":true,"stream":false,"options":{"temperature":0,`+opts+`}}`)
		require.Equal(t, 200, code, out)
		return out
	}
	out := gen(`"num_ctx":10,"num_predict":100`)
	requireFinal(t, out, "length", 3, 7)
	out = gen(`"num_ctx":100000,"num_predict":12`)
	requireFinal(t, out, "length", 3, 12)
	// The whole context, as /v1/completions without max_tokens gives it.
	out = gen(`"num_predict":100000,"repeat_penalty":1.3`)
	require.Equal(t, "length", out["done_reason"])
	require.Equal(t, float64(s.NCtx()-3+1), out["eval_count"])
	out = gen(`"num_predict":-2,"repeat_penalty":1.3`)
	require.Equal(t, float64(s.NCtx()-3+1), out["eval_count"])
}

// A request with nothing to generate answers at once, as ollama's load.
func TestOllamaLoad(t *testing.T) {
	_, url := start(t, Config{})
	code, out := post(t, url+"/api/generate", `{"model":"`+ollamaModelName+`"}`)
	require.Equal(t, 200, code, out)
	require.Equal(t, map[string]any{"model": ollamaModelName, "created_at": out["created_at"], "response": "", "done": true, "done_reason": "load"}, out)
	code, out = post(t, url+"/api/chat", `{"model":"`+ollamaModelName+`","messages":[],"keep_alive":"5m"}`)
	require.Equal(t, 200, code, out)
	require.Equal(t, "load", out["done_reason"])
	require.Equal(t, map[string]any{"role": "assistant", "content": ""}, out["message"])
}

// Each bad input gets ollama's {"error": "..."} with its status, and the
// server keeps answering.
func TestOllamaBadInputs(t *testing.T) {
	_, url := start(t, Config{MaxBodyBytes: 64 << 10})
	long := strings.Repeat("To be, or not to be, that is the question. ", 100)
	m := `"model":"` + ollamaModelName + `",`
	chat := m + `"messages":[{"role":"user","content":"hi"}]`
	cases := []struct {
		name, path, body string
		status           int
		text             string
	}{
		{"malformed JSON", "/api/chat", `{"messages": [`, 400, "not valid JSON"},
		{"empty body", "/api/generate", ``, 400, "must be a JSON object"},
		{"no model", "/api/generate", `{"prompt":"a"}`, 400, "model is required"},
		{"unknown model", "/api/chat", `{"model":"llama3.2","messages":[{"role":"user","content":"hi"}]}`, 404, `model "llama3.2" not found`},
		{"unknown tag", "/api/generate", `{"model":"` + ollamaModelName + `:7b","prompt":"a"}`, 404, "not found"},
		{"format yaml", "/api/generate", `{` + m + `"prompt":"a","format":"yaml"}`, 400, `format must be "json" or a JSON schema, not "yaml"`},
		{"format bad schema", "/api/chat", `{` + chat + `,"format":{"type":"frobnicate"}}`, 400, "format: json schema: "},
		{"tools", "/api/chat", `{` + chat + `,"tools":[{"type":"code_interpreter"}]}`, 400, `tools[0].type must be "function"`},
		{"template", "/api/generate", `{` + m + `"prompt":"a","template":"{{ .Prompt }}"}`, 400, "template is not supported"},
		{"context", "/api/generate", `{` + m + `"prompt":"a","context":[1,2,3]}`, 400, "context is not supported"},
		{"images", "/api/generate", `{` + m + `"prompt":"a","images":["aGk="]}`, 400, "images are not supported"},
		{"message images", "/api/chat", `{` + m + `"messages":[{"role":"user","content":"hi","images":["aGk="]}]}`, 400, "images are not supported"},
		{"raw with system", "/api/generate", `{` + m + `"prompt":"a","raw":true,"system":"s"}`, 400, "system cannot be used with raw"},
		{"think", "/api/chat", `{` + chat + `,"think":true}`, 400, "think is not supported"},
		{"bad role", "/api/chat", `{` + m + `"messages":[{"role":"wizard","content":"hi"}]}`, 400, `not "wizard"`},
		{"content a number", "/api/chat", `{` + m + `"messages":[{"role":"user","content":5}]}`, 400, "expected a string"},
		{"temperature a string", "/api/generate", `{` + m + `"prompt":"a","options":{"temperature":"hot"}}`, 400, `option "temperature" must be of type float32`}, // ollama's words
		{"temperature out of range", "/api/chat", `{` + chat + `,"options":{"temperature":3}}`, 400, "between 0 and 2"},
		{"top_p zero", "/api/generate", `{` + m + `"prompt":"a","options":{"top_p":0}}`, 400, "top_p"},
		{"presence penalty", "/api/generate", `{` + m + `"prompt":"a","options":{"presence_penalty":0.5}}`, 400, "presence_penalty is not supported"},
		{"mirostat", "/api/generate", `{` + m + `"prompt":"a","options":{"mirostat":2}}`, 400, "options.mirostat is not supported"},
		{"num_predict -3", "/api/generate", `{` + m + `"prompt":"a","options":{"num_predict":-3}}`, 400, "num_predict must be"},
		{"stream a string", "/api/generate", `{` + m + `"prompt":"a","stream":"no"}`, 400, "expected a boolean"},
		{"prompt too long", "/api/generate", `{` + m + `"prompt":"` + long + `","raw":true}`, 400, "the context is 512 tokens"},
		{"prompt past num_ctx", "/api/generate", `{` + m + `"prompt":"To be, or not to be","raw":true,"options":{"num_ctx":4}}`, 400, "options.num_ctx is 4"},
		{"body too large", "/api/generate", `{"prompt":"` + strings.Repeat("a", 70<<10) + `"}`, 413, "larger than the limit"},
		{"wrong method", "/api/chat", "", 405, "GET is not allowed on /api/chat"},
		{"unknown endpoint", "/api/pull", `{}`, 404, "no endpoint POST /api/pull"},
	}
	for _, c := range cases {
		method := "POST"
		if c.name == "wrong method" {
			method = "GET"
		}
		req, err := http.NewRequest(method, url+c.path, strings.NewReader(c.body))
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, c.status, resp.StatusCode, "%s: %s", c.name, raw)
		require.Equal(t, "application/json", resp.Header.Get("Content-Type"), c.name)
		var out map[string]any
		require.NoError(t, json.Unmarshal(raw, &out), c.name)
		require.Len(t, out, 1, "%s: only error: %s", c.name, raw)
		msg, ok := out["error"].(string)
		require.True(t, ok, "%s: error is a string: %s", c.name, raw)
		require.Contains(t, msg, c.text, c.name)
	}
	code, out := post(t, url+"/api/generate", `{`+m+`"prompt":"ROMEO:","stream":false,"options":{"num_predict":2,"num_gpu":99,"use_mmap":true,"num_thread":8,"penalize_newline":true,"typical_p":1,"unknown_option":"x"}}`)
	require.Equal(t, 200, code, out)
	require.Equal(t, 2.0, out["eval_count"])
}

// --api-key applies to the ollama endpoints as to the others (the version,
// as /health, needs none); the 401 is in ollama's shape.
func TestOllamaAPIKey(t *testing.T) {
	_, url := start(t, Config{APIKey: "sekret"})
	gen := `{"model":"` + ollamaModelName + `","prompt":"a","stream":false,"options":{"num_predict":2}}`
	for _, c := range []struct {
		method, path, body string
	}{{"POST", "/api/generate", gen}, {"POST", "/api/chat", `{"model":"x","messages":[]}`}, {"GET", "/api/tags", ""},
		{"POST", "/api/show", `{"model":"x"}`}, {"GET", "/api/ps", ""}} {
		for _, auth := range []string{"", "Bearer wrong", "sekret"} {
			req, _ := http.NewRequest(c.method, url+c.path, strings.NewReader(c.body))
			if auth != "" {
				req.Header.Set("Authorization", auth)
			}
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			var out map[string]any
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
			resp.Body.Close()
			require.Equal(t, 401, resp.StatusCode, "%s %q", c.path, auth)
			require.Contains(t, out["error"], "unauthorized")
		}
	}
	code, out := post(t, url+"/api/generate", gen, "Authorization", "Bearer sekret")
	require.Equal(t, 200, code, out)
	require.Equal(t, 2.0, out["eval_count"])
	lines := ollamaStream(t, context.Background(), url+"/api/chat",
		`{"model":"`+ollamaModelName+`","messages":[{"role":"user","content":"hi"}],"options":{"num_predict":3}}`, "Authorization", "Bearer sekret")
	require.Equal(t, 3.0, lines[len(lines)-1]["eval_count"])
	resp, err := http.Get(url + "/api/version")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
}

// /api/tags, /api/ps, /api/show and /api/version describe the one model
// in ollama's shapes.
func TestOllamaModelEndpoints(t *testing.T) {
	s, url := start(t, Config{ModelName: "bard"})
	get := func(path string) map[string]any {
		resp, err := http.Get(url + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, 200, resp.StatusCode)
		var out map[string]any
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
		return out
	}
	require.Equal(t, ollamaVersion, get("/api/version")["version"])
	for _, path := range []string{"/api/tags", "/api/ps"} {
		models := get(path)["models"].([]any)
		require.Len(t, models, 1)
		m := models[0].(map[string]any)
		require.Equal(t, "bard:latest", m["name"])
		require.Equal(t, "bard:latest", m["model"])
		require.Greater(t, m["size"].(float64), 1e6)
		require.Len(t, m["digest"], 64)
		d := m["details"].(map[string]any)
		require.Equal(t, "gguf", d["format"])
		require.Equal(t, "llama", d["family"])
		require.Equal(t, "F16", d["quantization_level"])
		require.Equal(t, "6.43M", d["parameter_size"]) // 6425856 as ollama's format.HumanNumber writes it
		if path == "/api/ps" {
			require.Equal(t, float64(s.NCtx()), m["context_length"])
			require.NotEmpty(t, m["expires_at"])
		} else {
			require.NotEmpty(t, m["modified_at"])
		}
	}
	// The listed name, the bare name and the file's name all generate.
	for _, name := range []string{"bard:latest", "bard", ollamaModelName} {
		code, out := post(t, url+"/api/generate", fmt.Sprintf(`{"model":%q,"prompt":"a","stream":false,"options":{"num_predict":1}}`, name))
		require.Equal(t, 200, code, out)
	}
	code, out := post(t, url+"/api/show", `{"model":"bard"}`)
	require.Equal(t, 200, code, out)
	info := out["model_info"].(map[string]any)
	require.Equal(t, "llama", info["general.architecture"])
	require.Equal(t, []any{}, info["tokenizer.ggml.tokens"], "arrays only when verbose")
	require.Greater(t, info["general.parameter_count"].(float64), 1e6)
	require.Equal(t, DefaultChatTemplate, out["template"])
	require.Contains(t, out["parameters"], "num_ctx")
	require.Contains(t, out["parameters"], "temperature")
	require.Equal(t, []any{"completion", "tools"}, out["capabilities"])
	require.Contains(t, out["modelfile"], "FROM ")
	code, out = post(t, url+"/api/show", `{"name":"bard","verbose":true}`)
	require.Equal(t, 200, code, out)
	require.Len(t, out["model_info"].(map[string]any)["tokenizer.ggml.tokens"], builtin(t).Tok.Size())
	code, out = post(t, url+"/api/show", `{"model":"llama3"}`)
	require.Equal(t, 404, code)
	require.Contains(t, out["error"], `model "llama3" not found`)
}

// A client that leaves an NDJSON stream frees its slot; Drain refuses new
// requests with 503 and CancelAll ends a stream with an error line.
func TestOllamaDisconnectAndShutdown(t *testing.T) {
	s, url := start(t, Config{Slots: 1})
	body := `{"model":"` + ollamaModelName + `","prompt":"ROMEO:","raw":true,"options":{"num_predict":500}}`
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", url+"/api/generate", strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_, err = bufio.NewReader(resp.Body).ReadString('\n') // generation is under way
	require.NoError(t, err)
	cancel()
	resp.Body.Close()
	waitFor(t, "the slot to free", func() bool { return metricsOf(t, url)["pinfer_slots_busy"] == 0 })
	require.Less(t, metricsOf(t, url)["pinfer_tokens_predicted_total"], 500.0)

	resp, err = http.Post(url+"/api/generate", "application/json", strings.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	_, err = br.ReadString('\n')
	require.NoError(t, err)
	s.Drain()
	code, out := post(t, url+"/api/chat", `{"model":"`+ollamaModelName+`","messages":[{"role":"user","content":"hi"}]}`)
	require.Equal(t, 503, code)
	require.Equal(t, map[string]any{"error": "the server is shutting down"}, out)
	s.CancelAll()
	rest, err := io.ReadAll(br)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(rest)), "\n")
	require.Equal(t, `{"error":"the server is shutting down"}`, lines[len(lines)-1])
	require.NotContains(t, string(rest), `"done":true`)
}
