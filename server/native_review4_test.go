package server

import (
	"bufio"
	"encoding/json"
	"github.com/stretchr/testify/require"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// FuzzNativeCompletion: any body to llama-server's /completion gets a 200
// with a JSON answer (or a stream of JSON events) or a 4xx error in
// llama-server's shape, never a panic or a 5xx.
func FuzzNativeCompletion(f *testing.F) {
	for _, b := range []string{
		`{"prompt":"ROMEO:","n_predict":4}`,
		`{"prompt":[1, 2, 3],"n_predict":2,"stream":true,"stop":["\n","e"]}`,
		`{"prompt":[1,"To be",5],"n_predict":3,"n_probs":2,"return_tokens":true}`,
		`{"prompt":{"prompt_string":"a"},"n_predict":0}`,
		`{"prompt":"a","logit_bias":[["a",false],[3,-1]],"samplers":"kt","n_predict":2}`,
		`{"prompt":"a","logit_bias":{"5":2,"b":-1},"ignore_eos":true,"n_predict":3,"temperature":1.5}`,
		`{"prompt":"a","json_schema":{"type":"object"},"n_predict":3}`,
		`{"prompt":[""],"n_predict":-1,"stream":true,"n_probs":1}`,
	} {
		f.Add(b)
	}
	s, err := New(builtin(f), Config{Threads: 1, Ctx: 64, MaxBodyBytes: 8 << 10})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(s.Close)
	f.Fuzz(func(t *testing.T, body string) {
		req := httptest.NewRequest("POST", "/completion", strings.NewReader(body))
		w := httptest.NewRecorder()
		done := make(chan struct{})
		go func() { s.ServeHTTP(w, req); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Fatalf("%q: no answer in 20 s", body)
		}
		out := w.Body.String()
		switch {
		case w.Code == http.StatusOK && strings.HasPrefix(w.Header().Get("Content-Type"), "text/event-stream"):
			sc := bufio.NewScanner(strings.NewReader(out))
			sc.Buffer(nil, 1<<20)
			for sc.Scan() {
				line, ok := strings.CutPrefix(sc.Text(), "data: ")
				if ok && !json.Valid([]byte(line)) {
					t.Fatalf("%q: event is not JSON: %q", body, line)
				}
			}
		case w.Code == http.StatusOK:
			if !json.Valid([]byte(out)) {
				t.Fatalf("%q: 200 with a body that is not JSON: %q", body, out)
			}
		case w.Code >= 400 && w.Code < 500:
			var e struct {
				Error map[string]any `json:"error"`
			}
			if json.Unmarshal([]byte(out), &e) != nil || e.Error["message"] == nil || e.Error["code"] == nil {
				t.Fatalf("%q: %d without llama-server's error: %q", body, w.Code, out)
			}
		default:
			t.Fatalf("%q: status %d: %q", body, w.Code, out)
		}
	})
}

// logit_bias given as an empty text names no token: llama-server
// tokenizes a pair's text ([["", 5]]) to nothing and biases nothing, so
// the request runs as without it (here: PyTorch's greedy tokens), where it
// was refused for "token id -1", an id the request never sent. The
// object form's "" key is read the same way (llama-server's strtol would
// take it for token 0). An id of -1 is still refused, by that id.
func TestNativeLogitBiasEmptyText(t *testing.T) {
	ref := loadReference(t)
	p := ref.Prompts[0]
	_, url := start(t, Config{})
	for _, bias := range []any{[][]any{{"", 5}}, map[string]any{"": false}} {
		code, out := post(t, url+"/completion", mustJSON(map[string]any{"prompt": p.IDs, "n_predict": 4, "temperature": 0, "return_tokens": true, "logit_bias": bias}))
		require.Equal(t, 200, code, "%v: %v", bias, out)
		require.Equal(t, p.GreedyIDs[:4], ints(t, out["tokens"]), "%v", bias)
		code, out = post(t, url+"/v1/completions", mustJSON(map[string]any{"prompt": p.IDs, "max_tokens": 4, "temperature": 0, "logit_bias": bias}))
		require.Equal(t, 200, code, "%v: %v", bias, out)
	}
	for _, bias := range []any{[][]any{{-1, 5}}, map[string]any{"-1": 5}} {
		code, out := post(t, url+"/completion", mustJSON(map[string]any{"prompt": p.IDs, "n_predict": 4, "logit_bias": bias}))
		require.Equal(t, 400, code, "%v: %v", bias, out)
		require.Contains(t, out["error"].(map[string]any)["message"], "token id -1")
	}
}

// has_new_line says whether the generated text holds a newline
// (llama-server sets it as each piece is sent, streaming or not), so a
// stream's closing event says so too, though its content is empty: the
// events before it carried the text. PyTorch's greedy text for the prompt
// has one within its first tokens; the stream's joined text is checked to
// hold it.
func TestNativeStreamHasNewLine(t *testing.T) {
	ref := loadReference(t)
	p := ref.Prompts[1]
	_, url := start(t, Config{})
	n := 12
	body := mustJSON(map[string]any{"prompt": p.IDs, "n_predict": n, "temperature": 0, "stream": true})
	events := nativeStream(t, url+"/completion", body)
	var text strings.Builder
	for _, ev := range events {
		text.WriteString(ev["content"].(string))
	}
	require.Contains(t, text.String(), "\n")
	last := events[len(events)-1]
	require.Equal(t, "", last["content"])
	require.Equal(t, true, last["has_new_line"], "the text streamed holds a newline")
	code, whole := post(t, url+"/completion", strings.Replace(body, `"stream":true`, `"stream":false`, 1))
	require.Equal(t, 200, code, whole)
	require.Equal(t, text.String(), whole["content"])
	require.Equal(t, true, whole["has_new_line"])
}

// llama-server takes any temperature (its sampler divides the logits by
// it; only OpenAI's API caps it at 2): a native request at 2.5 runs, with
// the temperature it asked for, where it got a 400. The OpenAI endpoint
// keeps OpenAI's cap.
func TestNativeTemperatureAboveTwo(t *testing.T) {
	_, url := start(t, Config{})
	for _, temp := range []float64{2.5, 1e6} {
		code, out := post(t, url+"/completion", mustJSON(map[string]any{"prompt": "ROMEO:", "n_predict": 4, "temperature": temp, "seed": 3}))
		require.Equal(t, 200, code, "%v: %v", temp, out)
		require.Equal(t, temp, out["generation_settings"].(map[string]any)["temperature"])
	}
	code, out := post(t, url+"/v1/completions", `{"prompt":"ROMEO:","max_tokens":4,"temperature":2.5}`)
	require.Equal(t, 400, code, out)
}
