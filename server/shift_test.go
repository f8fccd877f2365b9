package server

import (
	"net/http/httptest"
	"testing"

	"github.com/pinfer/pinfer/engine"
	"github.com/pinfer/pinfer/internal/fixtures"
	"github.com/pinfer/pinfer/sample"
	"github.com/stretchr/testify/require"
)

// With ContextShift, a completion asked for more tokens than its slot's
// context holds goes on, and its text is pinfer run's with --context-shift
// (engine's TestContextShift holds that to fresh sessions over the
// shifted windows); ollama's num_predict too. Without it, the request is
// refused, and n_keep with it.
func TestServerContextShift(t *testing.T) {
	path := fixtures.Path(t, "stories260K", "stories260K.gguf")
	m, err := engine.Load(path, "")
	require.NoError(t, err)
	defer m.Close()
	const nctx = 40
	for _, keep := range []int{-1, 2} {
		want, err := m.Generate(engine.Options{Prompt: "Once upon a time", N: 100, Ctx: nctx, Threads: 1, Sample: sample.Params{Temp: 0}, ContextShift: true, Keep: keep})
		require.NoError(t, err)
		require.Greater(t, want.Shifts, 1)

		srv, err := New(m, Config{Ctx: nctx, ContextShift: true, Threads: 1})
		require.NoError(t, err)
		hs := httptest.NewServer(srv)
		url := hs.URL
		code, out := post(t, url+"/v1/completions", `{"prompt":"Once upon a time","max_tokens":100,"temperature":0,"n_keep":`+mustJSON(keep)+`}`)
		require.Equal(t, 200, code, "%v", out)
		require.Equal(t, want.Text, completionText(t, out))
		require.Equal(t, float64(100), out["usage"].(map[string]any)["completion_tokens"])

		code, out = post(t, url+"/api/generate", `{"model":"stories260K","prompt":"Once upon a time","raw":true,"stream":false,"options":{"num_predict":100,"temperature":0}}`)
		require.Equal(t, 200, code, "%v", out)
		require.Equal(t, float64(100), out["eval_count"])
		hs.Close()
		srv.Close()
	}

	_, url := start(t, Config{Ctx: nctx})
	code, out := post(t, url+"/v1/completions", `{"prompt":"Once upon a time","max_tokens":100}`)
	require.Equal(t, 400, code, "%v", out)
	require.Contains(t, out["error"].(map[string]any)["message"], "max_tokens is too large")
	code, out = post(t, url+"/v1/completions", `{"prompt":"Once upon a time","max_tokens":4,"n_keep":2}`)
	require.Equal(t, 400, code, "%v", out)
	require.Contains(t, out["error"].(map[string]any)["message"], "start it with --context-shift")
}
