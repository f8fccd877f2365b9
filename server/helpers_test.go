package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/pinfer/pinfer/engine"
	"github.com/pinfer/pinfer/internal/fixtures"
	"github.com/pinfer/pinfer/models"
	"github.com/stretchr/testify/require"
)

var (
	modelOnce sync.Once
	model     *engine.Model
	modelErr  error
)

// builtin loads the built-in Shakespeare model once for all tests.
func builtin(t testing.TB) *engine.Model {
	t.Helper()
	modelOnce.Do(func() {
		path, err := models.DefaultModelPath()
		if err != nil {
			modelErr = err
			return
		}
		model, modelErr = engine.Load(path, "")
	})
	require.NoError(t, modelErr)
	return model
}

// start serves the built-in model on a loopback httptest server.
func start(t testing.TB, cfg Config) (*Server, string) {
	t.Helper()
	if cfg.Threads == 0 {
		cfg.Threads = 2
	}
	s, err := New(builtin(t), cfg)
	require.NoError(t, err)
	hs := httptest.NewServer(s)
	t.Cleanup(func() {
		hs.Close()
		s.Close()
	})
	return s, hs.URL
}

// reference holds PyTorch's greedy continuations of the checkpoint.
type reference struct {
	Prompts []struct {
		Text       string `json:"text"`
		IDs        []int  `json:"ids"`
		GreedyIDs  []int  `json:"greedy_ids"`
		GreedyText string `json:"greedy_text"`
	} `json:"prompts"`
}

func loadReference(t testing.TB) reference {
	b, err := os.ReadFile(fixtures.Path(t, "shakespeare-relu-6m", "reference.json"))
	require.NoError(t, err)
	var ref reference
	require.NoError(t, json.Unmarshal(b, &ref))
	require.NotEmpty(t, ref.Prompts)
	return ref
}

// post sends a JSON body and decodes the JSON answer.
func post(t testing.TB, url, body string, headers ...string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest("POST", url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var out map[string]any
	require.NoError(t, json.Unmarshal(raw, &out), "body: %s", raw)
	return resp.StatusCode, out
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// completionText is choices[0].text or choices[0].message.content.
func completionText(t testing.TB, out map[string]any) string {
	t.Helper()
	ch := out["choices"].([]any)[0].(map[string]any)
	if msg, ok := ch["message"].(map[string]any); ok {
		return msg["content"].(string)
	}
	return ch["text"].(string)
}

// sseEvents reads a stream's "data:" payloads up to [DONE] or the end.
func sseEvents(t testing.TB, r io.Reader) (events []map[string]any, done bool) {
	t.Helper()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		require.True(t, ok, "not an SSE data line: %q", line)
		if data == "[DONE]" {
			return events, true
		}
		var ev map[string]any
		require.NoError(t, json.Unmarshal([]byte(data), &ev))
		events = append(events, ev)
	}
	return events, false
}

// streamText posts a streaming request and joins its deltas.
func streamText(t testing.TB, ctx context.Context, url, body string) (string, []map[string]any) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "POST", url, bytes.NewReader([]byte(body)))
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	events, done := sseEvents(t, resp.Body)
	require.True(t, done, "no [DONE]")
	var text strings.Builder
	for _, ev := range events {
		for _, c := range ev["choices"].([]any) {
			ch := c.(map[string]any)
			if d, ok := ch["delta"].(map[string]any); ok {
				if s, ok := d["content"].(string); ok {
					text.WriteString(s)
				}
			} else if s, ok := ch["text"].(string); ok {
				text.WriteString(s)
			}
		}
	}
	return text.String(), events
}
