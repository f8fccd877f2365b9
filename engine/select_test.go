package engine

import (
	"fmt"
	"io"
	"path/filepath"
	"testing"

	"github.com/pinfer/pinfer/gguf"
	"github.com/pinfer/pinfer/graph"
	"github.com/stretchr/testify/require"
)

// Graphs are chosen by metadata alone: PowerInfer's files say nothing of
// their activation but carry powerinfer.sparse_threshold, which makes them
// ReLU models; a converted file says pinfer.ffn_activation.
func TestSelectByMetadata(t *testing.T) {
	specs, err := BuiltinGraphs()
	require.NoError(t, err)
	cases := []struct {
		arch string
		kv   map[string]any
		want string
	}{
		{"llama", nil, "llama"},
		{"llama", map[string]any{"pinfer.ffn_activation": "silu"}, "llama"},
		{"llama", map[string]any{"pinfer.ffn_activation": "relu"}, "relu-llama"},
		{"llama", map[string]any{"powerinfer.sparse_threshold": float32(0)}, "relu-llama"},
		{"llama", map[string]any{"llama.expert_count": uint32(8)}, "mixtral"},
		{"llama", map[string]any{"llama.expert_count": uint32(8), "pinfer.ffn_activation": "relu"}, "relu-mixtral"},
		{"falcon", map[string]any{"powerinfer.sparse_threshold": float32(0)}, "relu-falcon"},
		{"falcon", nil, "falcon"},
		{"opt", nil, "opt"},
		{"llama", map[string]any{"llama.expert_count": uint32(8), "pinfer.ffn_activation": "silu"}, "mixtral"},
		// llama.cpp reads an expert count of 0 as a dense model.
		{"llama", map[string]any{"llama.expert_count": uint32(0)}, "llama"},
		{"llama", map[string]any{"llama.expert_count": uint32(0), "pinfer.ffn_activation": "relu"}, "relu-llama"},
		{"llama", map[string]any{"llama.expert_count": uint32(0), "powerinfer.sparse_threshold": float32(0)}, "relu-llama"},
		{"falcon", map[string]any{"pinfer.ffn_activation": "gelu"}, "falcon"},
		// An activation no built-in graph computes: refused, not run as SiLU or GELU.
		{"llama", map[string]any{"pinfer.ffn_activation": "gelu_pytorch_tanh"}, ""},
		{"llama", map[string]any{"llama.expert_count": uint32(8), "pinfer.ffn_activation": "gelu"}, ""},
		{"falcon", map[string]any{"pinfer.ffn_activation": "silu"}, ""},
	}
	for i, c := range cases {
		w := gguf.NewWriter()
		require.NoError(t, w.Set("general.architecture", c.arch))
		for k, v := range c.kv {
			require.NoError(t, w.Set(k, v))
		}
		require.NoError(t, w.AddTensor("t", 0, []uint64{1}, func(o io.Writer) error { _, err := o.Write(make([]byte, 4)); return err }))
		path := filepath.Join(t.TempDir(), "m.gguf")
		require.NoError(t, w.WriteFile(path, nil))
		f, err := gguf.Open(path)
		require.NoError(t, err)
		s, err := graph.Select(specs, f)
		if c.want == "" {
			require.ErrorContains(t, err, fmt.Sprintf("pinfer.ffn_activation = %q", c.kv["pinfer.ffn_activation"]), "case %d", i)
			require.ErrorContains(t, err, "pass one with -g")
			f.Close()
			continue
		}
		require.NoError(t, err)
		require.Equal(t, c.want, s.Name, "case %d: %s %v", i, c.arch, c.kv)
		f.Close()
	}
}
