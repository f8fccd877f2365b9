package engine

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/pinfer/pinfer/gguf"
	"github.com/pinfer/pinfer/internal/fixtures"
	"github.com/stretchr/testify/require"
)

// withKV copies llama.cpp's stories260K GGUF with some metadata changed.
func withKV(t *testing.T, kv map[string]any) string {
	t.Helper()
	f, err := gguf.Open(fixtures.Path(t, "stories260K", "stories260K.gguf"))
	require.NoError(t, err)
	defer f.Close()
	path := filepath.Join(t.TempDir(), "m.gguf")
	require.NoError(t, writeWithKV(f, path, kv))
	return path
}

// writeWithKV writes src to path with kv's values in place of its own, in
// src's order, and kv's other keys after them.
func writeWithKV(src *gguf.File, path string, kv map[string]any) error {
	w, err := gguf.CopyOf(src)
	if err != nil {
		return err
	}
	for k, v := range kv {
		if err := w.Set(k, v); err != nil {
			return err
		}
	}
	return w.WriteFile(path, nil)
}

// Metadata that contradicts the tensors, or that would make every value
// NaN, fails the load with one line naming the key, where it used to run a
// shallower model or print "⁇" for every token.
func TestCorruptMetadataFailsLoad(t *testing.T) {
	m, err := Load(withKV(t, nil), "")
	require.NoError(t, err, "the unchanged copy loads")
	m.Close()
	for _, c := range []struct {
		kv   map[string]any
		want string
	}{
		{map[string]any{"llama.block_count": uint32(2)}, `"n_layer" = 2 (metadata key "llama.block_count"), but`},
		{map[string]any{"llama.block_count": uint32(0)}, "holds tensor blk.0."},
		{map[string]any{"llama.attention.layer_norm_rms_epsilon": float32(-1)}, "op rms_norm: eps -1 must be a finite number, at least 0"},
		{map[string]any{"llama.attention.layer_norm_rms_epsilon": float32(math.NaN())}, "eps NaN must be"},
		{map[string]any{"llama.rope.freq_base": float32(-5)}, "op rope: theta -5 must be a positive number"},
		{map[string]any{"llama.rope.freq_base": float32(0)}, "op rope: theta 0 must be a positive number"},
	} {
		_, err := Load(withKV(t, c.kv), "")
		require.Error(t, err, "%v", c.kv)
		require.Contains(t, err.Error(), c.want)
		require.NotContains(t, err.Error(), "\n")
	}
}
