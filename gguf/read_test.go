package gguf

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/pinfer/pinfer/ops"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestStories260K(t *testing.T) {
	dir := filepath.Join(modelsDir(t), "stories260K")
	var trace struct {
		Config struct {
			Dim       int `json:"dim"`
			HiddenDim int `json:"hidden_dim"`
			NLayers   int `json:"n_layers"`
			NHeads    int `json:"n_heads"`
			NKVHeads  int `json:"n_kv_heads"`
			VocabSize int `json:"vocab_size"`
		} `json:"config"`
	}
	js, err := os.ReadFile(filepath.Join(dir, "greedy_trace.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(js, &trace))
	require.Equal(t, 64, trace.Config.Dim, "fixture changed")

	f, err := Open(filepath.Join(dir, "stories260K.gguf"))
	require.NoError(t, err)
	defer f.Close()

	assert.Equal(t, "GGUF", f.Magic)
	assert.Equal(t, "llama", f.Arch())
	for key, want := range map[string]int{
		"llama.embedding_length":        trace.Config.Dim,
		"llama.feed_forward_length":     trace.Config.HiddenDim,
		"llama.block_count":             trace.Config.NLayers,
		"llama.attention.head_count":    trace.Config.NHeads,
		"llama.attention.head_count_kv": trace.Config.NKVHeads,
	} {
		got, err := f.Uint(key)
		require.NoError(t, err, key)
		assert.Equal(t, uint64(want), got, key)
		i, err := f.Int(key)
		require.NoError(t, err)
		assert.Equal(t, int64(want), i)
		fl, err := f.Float(key)
		require.NoError(t, err)
		assert.Equal(t, float64(want), fl)
	}
	toks, err := f.Strings("tokenizer.ggml.tokens")
	require.NoError(t, err)
	assert.Len(t, toks, trace.Config.VocabSize)
	scores, err := f.Float32s("tokenizer.ggml.scores")
	require.NoError(t, err)
	assert.Len(t, scores, trace.Config.VocabSize)
	types, err := f.Int32s("tokenizer.ggml.token_type")
	require.NoError(t, err)
	assert.Len(t, types, trace.Config.VocabSize)
	eps, err := f.Float("llama.attention.layer_norm_rms_epsilon")
	require.NoError(t, err)
	assert.Greater(t, eps, 0.0)
	assert.Less(t, eps, 1e-3)

	require.Len(t, f.Tensors, 48)
	// 48 = token_embd + output_norm + output + 9 per layer, so the count agrees with n_layers.
	assert.Equal(t, 3+9*trace.Config.NLayers, len(f.Tensors))
	first := f.Tensors[0]
	assert.Equal(t, "token_embd.weight", first.Name)
	assert.Equal(t, []uint64{uint64(trace.Config.Dim), uint64(trace.Config.VocabSize)}, first.Dims)
	assert.Equal(t, ops.F32, first.Type)
	assert.Equal(t, uint64(4*64*512), first.Size)

	norm, ok := f.Tensor("blk.0.attn_norm.weight")
	require.True(t, ok)
	assert.Equal(t, []uint64{64}, norm.Dims)
	data := f.Data(norm)
	require.Len(t, data, 4*64)
	for i := 0; i < 64; i++ {
		v := math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
		assert.False(t, math.IsNaN(float64(v)) || math.IsInf(float64(v), 0), "element %d is %v", i, v)
	}
	for i := range f.Tensors {
		tt := &f.Tensors[i]
		assert.Zero(t, f.DataOffset%f.Alignment)
		assert.Equal(t, tt.Size, uint64(len(f.Data(tt))))
	}

	_, err = f.String("llama.block_count")
	assert.EqualError(t, err, f.Path+`: metadata key "llama.block_count": want string, got uint32`)
	_, err = f.Uint("no.such.key")
	assert.EqualError(t, err, f.Path+`: metadata key "no.such.key": missing`)
	_, err = f.Strings("tokenizer.ggml.scores")
	assert.EqualError(t, err, f.Path+`: metadata key "tokenizer.ggml.scores": want array of string, got array of float32`)
	_, ok = f.Tensor("nope")
	assert.False(t, ok)
}

func TestVocabOnly(t *testing.T) {
	f, err := Open(filepath.Join(modelsDir(t), "vocab-llama-spm", "ggml-vocab-llama-spm.gguf"))
	require.NoError(t, err)
	defer f.Close()
	assert.Empty(t, f.Tensors)
	toks, err := f.Strings("tokenizer.ggml.tokens")
	require.NoError(t, err)
	assert.Len(t, toks, 32000)
	bos, err := f.Bool("tokenizer.ggml.add_bos_token")
	require.NoError(t, err)
	assert.True(t, bos)
	assert.Equal(t, "llama", f.Arch())

	// A second real vocab-only file must open too.
	g, err := Open(filepath.Join(modelsDir(t), "vocab-phi-3", "ggml-vocab-phi-3.gguf"))
	require.NoError(t, err)
	defer g.Close()
	assert.Empty(t, g.Tensors)
	assert.NotEmpty(t, g.Arch())
}
