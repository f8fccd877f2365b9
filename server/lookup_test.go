package server

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pinfer/pinfer/engine"
	"github.com/pinfer/pinfer/internal/fixtures"
)

// serve --lookup: prompt lookup drafts for each slot. On stories260K,
// whose greedy text repeats itself, the 200 greedy tokens from BOS are
// still llama2.c's text, in fewer passes; sampled and stopped requests
// give the same text as a server without lookup, on two slots at once.
func TestServeLookup(t *testing.T) {
	m, err := engine.Load(fixtures.Path(t, "stories260K", "stories260K.gguf"), "")
	require.NoError(t, err)
	defer m.Close()
	want, err := os.ReadFile(fixtures.Path(t, "stories260K", "expected_t0_n200.txt"))
	require.NoError(t, err)
	serve := func(cfg Config) string {
		s, err := New(m, cfg)
		require.NoError(t, err)
		hs := httptest.NewServer(s)
		t.Cleanup(func() { hs.Close(); s.Close() })
		return hs.URL
	}
	plain := serve(Config{Slots: 2, Threads: 2})
	look := serve(Config{Slots: 2, Threads: 2, Lookup: 6})

	// /props gives the drafts' defaults that requests get (--lookup 6).
	resp, err := http.Get(look + "/props")
	require.NoError(t, err)
	var props struct {
		D struct {
			P map[string]any `json:"params"`
		} `json:"default_generation_settings"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&props))
	resp.Body.Close()
	require.Equal(t, float64(6), props.D.P["speculative.n_max"])
	require.Equal(t, float64(0), props.D.P["speculative.n_min"])

	code, out := post(t, look+"/completion", `{"prompt":[1],"n_predict":200,"temperature":0}`)
	require.Equal(t, 200, code, out)
	require.Equal(t, strings.TrimPrefix(string(want), " "), strings.TrimPrefix(out["content"].(string), " "))
	tm := timingsOf(out)
	require.Greater(t, tm["draft_n_accepted"], 10.0)
	require.LessOrEqual(t, tm["draft_n_accepted"], tm["draft_n"])
	require.Equal(t, 199-tm["draft_n_accepted"].(float64), tm["predicted_runs"], "a pass per token not drafted right")
	// Tokens a second, as llama-server counts them: more than passes a second.
	require.InDelta(t, 1000*tm["predicted_n"].(float64)/tm["predicted_ms"].(float64), tm["predicted_per_second"], 1e-6)
	require.Equal(t, tm["draft_n_accepted"], metricsOf(t, look)["pinfer_draft_tokens_accepted_total"])

	bodies := []string{
		`{"prompt":"Once upon a time, Lily","n_predict":120,"temperature":0.7,"top_k":40,"seed":3}`,
		`{"prompt":"Once upon a time, Lily","n_predict":120,"temperature":0,"repeat_penalty":1.3,"repeat_last_n":16}`,
		`{"prompt":"Once upon a time, Lily","n_predict":150,"temperature":0,"stop":["park"]}`,
	}
	got := make(chan [2]any, len(bodies))
	for _, b := range bodies {
		go func() {
			_, a := post(t, plain+"/completion", b)
			_, l := post(t, look+"/completion", b)
			got <- [2]any{a, l}
		}()
	}
	for range bodies {
		r := <-got
		a, l := r[0].(map[string]any), r[1].(map[string]any)
		require.Equal(t, a["content"], l["content"])
		require.Equal(t, a["stop_type"], l["stop_type"])
	}
}
