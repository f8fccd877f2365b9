package server

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/pinfer/pinfer/engine"
	"github.com/pinfer/pinfer/models"
	"github.com/stretchr/testify/require"
)

// When no node feeds the output (the whole step fused into one GPU op, as
// the H200 run showed), embeddings are refused with a 501 that says why,
// not a 500. (The edited graph is never run: its output reads nothing.)
func TestEmbeddingsWithoutHiddenState(t *testing.T) {
	path, err := models.DefaultModelPath()
	require.NoError(t, err)
	m, err := engine.Load(path, "")
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })
	out := m.Prog.Nodes[m.Prog.Output]
	out.In = append([]int{-1}, out.In[1:]...) // what the fused step leaves: no node to read
	_, err = m.Prog.HiddenNode()
	require.Error(t, err)

	s, err := New(m, Config{Threads: 2})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	for _, c := range []struct{ path, body string }{
		{"/v1/embeddings", `{"input":"ROMEO:"}`},
		{"/api/embed", `{"model":"shakespeare-relu-6m-f16","input":"ROMEO:"}`},
	} {
		req := httptest.NewRequest("POST", c.path, strings.NewReader(c.body))
		req.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		s.ServeHTTP(w, req)
		code, body := w.Code, w.Body.String()
		require.Equal(t, 501, code, body)
		require.Contains(t, body, "embeddings are not available with this placement")
	}
}
