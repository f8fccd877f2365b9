package engine

import (
	"io"
	"path/filepath"
	"slices"
	"testing"

	"github.com/pinfer/pinfer/gguf"
	"github.com/pinfer/pinfer/internal/fixtures"

	"github.com/pinfer/pinfer/ops"
	"github.com/stretchr/testify/require"
)

// The KV cache's size follows from the file's hyperparameters alone: per
// layer and position, n_head_kv·head_dim keys and as many values.
func TestKVBytesFromHyperparameters(t *testing.T) {
	m, err := Load(shakespeareGGUF(t, ops.F32), "")
	require.NoError(t, err)
	defer m.Close()
	hp := func(k string) int64 {
		v, err := m.File.Uint(m.File.Arch() + "." + k)
		require.NoError(t, err, k)
		return int64(v)
	}
	layers, embd, heads, kvHeads := hp("block_count"), hp("embedding_length"), hp("attention.head_count"), hp("attention.head_count_kv")
	perPos := layers * 2 * kvHeads * (embd / heads)
	require.Equal(t, perPos*4*300, m.Prog.KVBytes(300, ops.F32))
	require.Equal(t, perPos*2*300, m.Prog.KVBytes(300, ops.F16))
}

// A context whose caches could never fit is refused before anything is
// allocated (Go would die of it at the first forward pass), with the size
// it needs; one that fits runs.
func TestHugeContextRefused(t *testing.T) {
	m, err := Load(shakespeareGGUF(t, ops.F32), "")
	require.NoError(t, err)
	defer m.Close()
	if memoryBytes() == 0 {
		t.Skip("this OS does not say how much memory it has")
	}
	_, err = m.Generate(Options{PromptIDs: []int{1, 2}, N: 2, Ctx: 1 << 40, Threads: 1})
	require.ErrorContains(t, err, "positions needs")
	require.ErrorContains(t, err, "GB of KV cache")
	require.Error(t, m.CheckContext(1<<32, 1))
	require.NoError(t, m.CheckContext(512, 1))
	res, err := m.Generate(Options{PromptIDs: []int{1, 2}, N: 2, Ctx: 64, Threads: 1})
	require.NoError(t, err)
	require.Len(t, res.Tokens, 2)
}

// A token the metadata names as end of turn ends the text where it comes,
// as EOS does, and is not emitted.
func TestEndOfTurnStops(t *testing.T) {
	greedy := func(path string) *Result {
		m, err := Load(path, "")
		require.NoError(t, err)
		defer m.Close()
		res, err := m.Generate(Options{PromptIDs: []int{1}, N: 24, Threads: 1})
		require.NoError(t, err)
		return res
	}
	base := greedy(withKV(t, nil))
	require.Equal(t, "length", base.StopReason)
	k := 4
	for slices.Contains(base.Tokens[:k], base.Tokens[k]) {
		k++
	}
	res := greedy(withKV(t, map[string]any{"tokenizer.ggml.eot_token_id": uint32(base.Tokens[k])}))
	require.Equal(t, "eos", res.StopReason)
	require.Equal(t, base.Tokens[:k], res.Tokens)
}

// --kv-type takes llama.cpp's spellings in either case, as --type does.
func TestParseKVTypeCase(t *testing.T) {
	for s, want := range map[string]ops.DType{"f16": ops.F16, "F16": ops.F16, "f32": ops.F32, "F32": ops.F32} {
		got, err := ParseKVType(s)
		require.NoError(t, err, s)
		require.Equal(t, want, got, s)
	}
	_, err := ParseKVType("q8_0")
	require.ErrorContains(t, err, "want f32 or f16")
}

// A file that stretches RoPE (linear or YaRN scaling, as llama.cpp writes
// it) is refused with the key, where it ran unscaled and wrote other text;
// "none" is no scaling.
func TestRoPEScalingRefused(t *testing.T) {
	for _, c := range []struct {
		kv   map[string]any
		want string
	}{
		{map[string]any{"llama.rope.scaling.type": "linear", "llama.rope.scaling.factor": float32(4)}, `"llama.rope.scaling.type" = "linear"`},
		{map[string]any{"llama.rope.scaling.type": "yarn"}, `"llama.rope.scaling.type" = "yarn"`},
		{map[string]any{"llama.rope.scale_linear": float32(2)}, `"llama.rope.scale_linear" = 2`},
		{map[string]any{"llama.rope.scaling.type": "none", "llama.rope.scaling.factor": float32(4)}, ""},
		{map[string]any{"llama.rope.scaling.factor": float32(1)}, ""},
	} {
		m, err := Load(withKV(t, c.kv), "")
		if c.want == "" {
			require.NoError(t, err, "%v", c.kv)
			m.Close()
			continue
		}
		require.ErrorContains(t, err, c.want)
		require.ErrorContains(t, err, "RoPE scaling is not supported")
	}
}

// A tensor that no slot of the graph names (an attention bias, a RoPE
// frequency table) is refused, where the model ran without it.
func TestStrayTensorRefused(t *testing.T) {
	f, err := gguf.Open(fixtures.Path(t, "stories260K", "stories260K.gguf"))
	require.NoError(t, err)
	defer f.Close()
	w, err := gguf.CopyOf(f)
	require.NoError(t, err)
	q, _ := f.Tensor("blk.0.attn_q.weight")
	bias := make([]byte, 4*q.Dims[1])
	require.NoError(t, w.AddTensor("blk.0.attn_q.bias", ops.F32, []uint64{q.Dims[1]}, func(o io.Writer) error { _, err := o.Write(bias); return err }))
	path := filepath.Join(t.TempDir(), "bias.gguf")
	require.NoError(t, w.WriteFile(path, nil))
	_, err = Load(path, "")
	require.ErrorContains(t, err, "tensor blk.0.attn_q.bias is not used by graph")
}
