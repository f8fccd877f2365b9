package server

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// /props gives what llama-server's does for a client to build its own
// prompts: the template, the context, the slots and the defaults.
func TestProps(t *testing.T) {
	s, url := start(t, Config{Slots: 2})
	resp, err := http.Get(url + "/props")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	b, _ := io.ReadAll(resp.Body)
	var out map[string]any
	require.NoError(t, json.Unmarshal(b, &out))
	require.Equal(t, float64(2), out["total_slots"])
	require.Equal(t, DefaultChatTemplate, out["chat_template"], "the built-in model has no template of its own")
	require.Equal(t, "<s>", out["bos_token"])
	require.Equal(t, "</s>", out["eos_token"])
	d := out["default_generation_settings"].(map[string]any)
	require.Equal(t, float64(s.NCtx()), d["n_ctx"])
	// llama.cpp's sampling defaults, which requests without the fields get.
	p := d["params"].(map[string]any)
	require.Equal(t, 0.8, p["temperature"])
	require.Equal(t, float64(40), p["top_k"])
	require.Equal(t, 0.95, p["top_p"])
	require.Equal(t, 0.05, p["min_p"])
	require.Equal(t, float64(-1), p["n_predict"])
	// No draft model: a request drafts nothing.
	require.Equal(t, float64(0), p["speculative.n_max"])
	require.Equal(t, float64(0), p["speculative.n_min"])

	resp, err = http.Post(url+"/props", "application/json", nil)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 405, resp.StatusCode)
}

// /apply-template renders messages as a chat request would, and a chat
// request for the same messages is the completion of that prompt.
func TestApplyTemplate(t *testing.T) {
	_, url := start(t, Config{})
	msgs := `"messages":[{"role":"system","content":"Speak."},{"role":"user","content":"Who art thou?"}]`
	code, out := post(t, url+"/apply-template", `{`+msgs+`}`)
	require.Equal(t, 200, code, out)
	prompt := out["prompt"].(string)
	require.Equal(t, "system: Speak.\nuser: Who art thou?\nassistant:", prompt)

	code, chat := post(t, url+"/v1/chat/completions", `{"temperature":0,"max_tokens":12,`+msgs+`}`)
	require.Equal(t, 200, code, chat)
	code, comp := post(t, url+"/v1/completions", mustJSON(map[string]any{"temperature": 0, "max_tokens": 12, "prompt": prompt}))
	require.Equal(t, 200, code, comp)
	require.Equal(t, completionText(t, comp), completionText(t, chat))

	code, out = post(t, url+"/apply-template", `{"messages":[{"role":"user"}]}`)
	require.Equal(t, 400, code, out)
}
