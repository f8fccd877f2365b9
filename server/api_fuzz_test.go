package server

import (
	"bufio"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// FuzzAPI: any request body to any POST endpoint gets either a 200 with a
// JSON answer (an SSE stream of JSON events, or ollama's NDJSON lines, when
// it asks to stream) or a 4xx error in its API's shape, never a 5xx.
func FuzzAPI(f *testing.F) {
	paths := []string{"/v1/completions", "/v1/chat/completions", "/tokenize", "/detokenize", "/apply-template",
		"/api/generate", "/api/chat", "/api/show", "/v1/embeddings", "/api/embed"}
	for _, b := range []string{
		`{"prompt":"ROMEO:","max_tokens":4}`,
		`{"prompt":[1, 2, 3],"max_tokens":2,"stream":true,"stop":["\n"]}`,
		`{"messages":[{"role":"user","content":"hi"}],"max_tokens":3,"temperature":0.7,"seed":5}`,
		`{"messages":[{"role":"system","content":[{"type":"text","text":"be brief"}]},{"role":"user","content":"hi"}],"max_tokens":2,"stream":true,"stream_options":{"include_usage":true}}`,
		`{"content":"To be, or not to be"}`,
		`{"tokens":[1, 300, 2]}`,
		`{"prompt":"a","max_tokens":1.5}`,
		`{"messages":[{"role":"wizard","content":"hi"}]}`,
		`{"prompt":"a","logprobs":3,"top_p":0.5,"top_k":4,"max_tokens":2}`,
		`{"prompt":"ROMEO: hi","echo":true,"logprobs":1,"max_tokens":0}`,
		`{"messages":[{"role":"user","content":"hi"}],"logprobs":true,"top_logprobs":2,"max_tokens":2,"stream":true}`,
		`{"model":"shakespeare-relu-6m-f16","prompt":"hi","options":{"num_predict":3,"temperature":0}}`,
		`{"model":"shakespeare-relu-6m-f16:latest","messages":[{"role":"user","content":"hi"}],"stream":false,"options":{"num_predict":2,"num_ctx":32}}`,
		`{"model":"shakespeare-relu-6m-f16","prompt":"hi","raw":true,"stream":true,"options":{"num_predict":2,"stop":["\n"]}}`,
		`{"model":"shakespeare-relu-6m-f16","input":["ROMEO:","hi"],"encoding_format":"base64"}`,
		`{"input":[[1,2],[3]],"embd_normalize":1}`,
	} {
		for i := range paths {
			f.Add(uint8(i), b)
		}
	}
	s, err := New(builtin(f), Config{Threads: 1, Ctx: 64, MaxBodyBytes: 8 << 10})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(s.Close)
	f.Fuzz(func(t *testing.T, which uint8, body string) {
		path := paths[int(which)%len(paths)]
		req := httptest.NewRequest("POST", path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		s.ServeHTTP(w, req)
		out := w.Body.String()
		ollama := strings.HasPrefix(path, "/api/")
		switch {
		case w.Code == http.StatusOK && strings.HasPrefix(w.Header().Get("Content-Type"), "application/x-ndjson"):
			for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
				if !json.Valid([]byte(line)) {
					t.Fatalf("POST %s %q: NDJSON line is not JSON: %q", path, body, line)
				}
			}
		case w.Code >= 400 && w.Code < 500 && ollama:
			var e struct {
				Error string `json:"error"`
			}
			if json.Unmarshal([]byte(out), &e) != nil || e.Error == "" {
				t.Fatalf("POST %s %q: %d without an ollama error: %q", path, body, w.Code, out)
			}
		case w.Code == http.StatusOK && strings.HasPrefix(w.Header().Get("Content-Type"), "text/event-stream"):
			sc := bufio.NewScanner(strings.NewReader(out))
			sc.Buffer(nil, 1<<20)
			for sc.Scan() {
				line, ok := strings.CutPrefix(sc.Text(), "data: ")
				if !ok || line == "[DONE]" {
					continue
				}
				if !json.Valid([]byte(line)) {
					t.Fatalf("POST %s %q: event is not JSON: %q", path, body, line)
				}
			}
		case w.Code == http.StatusOK:
			if !json.Valid([]byte(out)) {
				t.Fatalf("POST %s %q: 200 with a body that is not JSON: %q", path, body, out)
			}
		case w.Code >= 400 && w.Code < 500:
			var e struct {
				Error map[string]any `json:"error"`
			}
			if json.Unmarshal([]byte(out), &e) != nil || e.Error["message"] == nil || e.Error["type"] == nil {
				t.Fatalf("POST %s %q: %d without an OpenAI error: %q", path, body, w.Code, out)
			}
		default:
			t.Fatalf("POST %s %q: status %d: %q", path, body, w.Code, out)
		}
	})
}
