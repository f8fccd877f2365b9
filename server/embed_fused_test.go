package server

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/pinfer/pinfer/engine"
	"github.com/pinfer/pinfer/graph"
	"github.com/pinfer/pinfer/models"
	"github.com/stretchr/testify/require"
)

// standIn makes m's program what the whole step fused on the GPU leaves: an
// output that reads no node, so no hidden state (the edited program is
// never run). With host, the original program stays as Model.Host, as
// cmd/pinfer's swapIn leaves it.
func standIn(t *testing.T, host bool) *engine.Model {
	path, err := models.DefaultModelPath()
	require.NoError(t, err)
	m, err := engine.Load(path, "")
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })
	orig := m.Prog
	nodes := append([]*graph.Node(nil), orig.Nodes...)
	out := *nodes[orig.Output]
	out.In = append([]int{-1}, out.In[1:]...)
	nodes[orig.Output] = &out
	// As hybrid.NewDeviceExec makes its one-node program.
	m.Prog = &graph.Program{Spec: orig.Spec, Params: orig.Params, Nodes: nodes, Output: orig.Output, Vocab: orig.Vocab, Layers: orig.Layers}
	_, err = m.Prog.HiddenNode()
	require.Error(t, err)
	if host {
		m.Host = orig
	}
	return m
}

func postTo(s *Server, path, body string) (int, string) {
	req := httptest.NewRequest("POST", path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	s.ServeHTTP(w, req)
	return w.Code, w.Body.String()
}

// Without a host program, embeddings are refused with a 501 that says why,
// not a 500.
func TestEmbeddingsWithoutHiddenState(t *testing.T) {
	s, err := New(standIn(t, false), Config{Threads: 2})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	for _, c := range []struct{ path, body string }{
		{"/v1/embeddings", `{"input":"ROMEO:"}`},
		{"/api/embed", `{"model":"shakespeare-relu-6m-f16","input":"ROMEO:"}`},
	} {
		code, body := postTo(s, c.path, c.body)
		require.Equal(t, 501, code, body)
		require.Contains(t, body, "embeddings are not available for this graph")
	}
}

// With the whole step on the device, the CPU runs the program it replaced
// for embeddings: the vectors are the pooled hidden rows of the plain
// model (hiddenRows, pinned to PyTorch through the logits).
func TestEmbeddingsFromHostProgram(t *testing.T) {
	s, err := New(standIn(t, true), Config{Threads: 2})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	for _, p := range loadReference(t).Prompts {
		code, body := postTo(s, "/v1/embeddings", mustJSON(map[string]any{"input": p.IDs}))
		require.Equal(t, 200, code, body)
		var out struct {
			Data []struct{ Embedding []float64 } `json:"data"`
		}
		require.NoError(t, json.Unmarshal([]byte(body), &out))
		require.Len(t, out.Data, 1)
		require.InDeltaSlice(t, unit(meanOf(hiddenRows(t, p.IDs))), out.Data[0].Embedding, 1e-5)
	}
}
