package convert

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pinfer/pinfer/gguf"
	"github.com/pinfer/pinfer/ops"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ggufName is llama.cpp's tensor naming, written out for the test.
func ggufName(hf string) string {
	fixed := map[string]string{
		"model.embed_tokens.weight": "token_embd.weight",
		"model.norm.weight":         "output_norm.weight",
		"lm_head.weight":            "output.weight",
	}
	if n, ok := fixed[hf]; ok {
		return n
	}
	var layer int
	var rest string
	if _, err := fmt.Sscanf(hf, "model.layers.%d.%s", &layer, &rest); err != nil {
		return ""
	}
	part := map[string]string{
		"input_layernorm.weight":          "attn_norm",
		"self_attn.q_proj.weight":         "attn_q",
		"self_attn.k_proj.weight":         "attn_k",
		"self_attn.v_proj.weight":         "attn_v",
		"self_attn.o_proj.weight":         "attn_output",
		"post_attention_layernorm.weight": "ffn_norm",
		"mlp.gate_proj.weight":            "ffn_gate",
		"mlp.up_proj.weight":              "ffn_up",
		"mlp.down_proj.weight":            "ffn_down",
	}[rest]
	return fmt.Sprintf("blk.%d.%s.weight", layer, part)
}

// interleave applies the documented q/k reordering to a row-major matrix:
// within each head of hd rows, new row 2i = old row i, 2i+1 = old row i+hd/2.
func interleave(src []float64, rows, cols, heads int) []float64 {
	out := make([]float64, len(src))
	hd := rows / heads
	for h := 0; h < heads; h++ {
		for i := 0; i < hd/2; i++ {
			copy(out[(h*hd+2*i)*cols:][:cols], src[(h*hd+i)*cols:][:cols])
			copy(out[(h*hd+2*i+1)*cols:][:cols], src[(h*hd+i+hd/2)*cols:][:cols])
		}
	}
	return out
}

func openGGUF(t *testing.T, path string) *gguf.File {
	t.Helper()
	f, err := gguf.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	return f
}

func tensor(t *testing.T, f *gguf.File, name string) *gguf.TensorInfo {
	t.Helper()
	ti, ok := f.Tensor(name)
	require.True(t, ok, "tensor %s missing", name)
	return ti
}

func mustUint(t *testing.T, f *gguf.File, key string) uint64 {
	t.Helper()
	v, err := f.Uint(key)
	require.NoError(t, err, key)
	return v
}

func TestConvertShakespeareF32(t *testing.T) {
	src := filepath.Join(sharedModels(t), "shakespeare-relu-6m")
	out := filepath.Join(t.TempDir(), "s.gguf")
	require.NoError(t, Convert(src, out, Options{Type: ops.F32}))
	f := openGGUF(t, out)
	cfg := readConfigMap(t, src)
	num := func(k string) uint64 { return uint64(cfg[k].(float64)) }

	for key, want := range map[string]uint64{
		"general.file_type":               0,
		"general.alignment":               32,
		"llama.context_length":            num("max_position_embeddings"),
		"llama.embedding_length":          num("hidden_size"),
		"llama.block_count":               num("num_hidden_layers"),
		"llama.feed_forward_length":       num("intermediate_size"),
		"llama.attention.head_count":      num("num_attention_heads"),
		"llama.attention.head_count_kv":   num("num_key_value_heads"),
		"llama.rope.dimension_count":      num("head_dim"),
		"llama.vocab_size":                num("vocab_size"),
		"tokenizer.ggml.bos_token_id":     num("bos_token_id"),
		"tokenizer.ggml.eos_token_id":     num("eos_token_id"),
		"tokenizer.ggml.unknown_token_id": 0, // "<unk>" is piece 0 of tokenizer.model
	} {
		assert.Equal(t, want, mustUint(t, f, key), key)
	}
	for key, want := range map[string]string{
		"general.architecture":  "llama",
		"general.name":          "shakespeare-relu-6m",
		"pinfer.ffn_activation": cfg["hidden_act"].(string),
		"tokenizer.ggml.model":  "llama",
	} {
		got, err := f.String(key)
		require.NoError(t, err, key)
		assert.Equal(t, want, got, key)
	}
	theta, err := f.Float("llama.rope.freq_base")
	require.NoError(t, err)
	assert.Equal(t, float32(cfg["rope_parameters"].(map[string]any)["rope_theta"].(float64)), float32(theta))
	eps, err := f.Float("llama.attention.layer_norm_rms_epsilon")
	require.NoError(t, err)
	assert.Equal(t, float32(cfg["rms_norm_eps"].(float64)), float32(eps))

	toks, err := f.Strings("tokenizer.ggml.tokens")
	require.NoError(t, err)
	require.Len(t, toks, int(num("vocab_size")))
	assert.Equal(t, []string{"<unk>", "<s>", "</s>", "<0x00>"}, toks[:4])
	types, err := f.Int32s("tokenizer.ggml.token_type")
	require.NoError(t, err)
	require.Len(t, types, len(toks))
	assert.Equal(t, []int32{2, 3, 3, 6}, types[:4]) // unknown, control, control, byte
	scores, err := f.Float32s("tokenizer.ggml.scores")
	require.NoError(t, err)
	assert.Len(t, scores, len(toks))
	addBOS, err := f.Bool("tokenizer.ggml.add_bos_token")
	require.NoError(t, err)
	assert.True(t, addBOS)
	_, err = f.Bool("tokenizer.ggml.add_space_prefix")
	require.NoError(t, err)

	st := readST(t, filepath.Join(src, "model.safetensors"))
	require.Len(t, f.Tensors, 2+9*6+1)
	nHead, nKV, hd := int(num("num_attention_heads")), int(num("num_key_value_heads")), int(num("head_dim"))
	for hf, s := range st {
		name := ggufName(hf)
		ti := tensor(t, f, name)
		want := []uint64{uint64(s.Shape[len(s.Shape)-1])}
		if len(s.Shape) == 2 {
			want = append(want, uint64(s.Shape[0]))
		}
		assert.Equal(t, want, ti.Dims, name)
		assert.Equal(t, ops.F32, ti.Type, name)
		ref := s.values(t)
		switch {
		case strings.HasSuffix(name, "attn_q.weight"):
			ref = interleave(ref, s.Shape[0], s.Shape[1], nHead)
		case strings.HasSuffix(name, "attn_k.weight"):
			ref = interleave(ref, s.Shape[0], s.Shape[1], nKV)
		}
		// f16 -> f32 is exact, so every value must match exactly.
		assert.Equal(t, ref, f32s(f.Data(ti)), name)
	}

	// The spec's statement of the permutation, checked row by row on blk.0.attn_q.
	q := f32s(f.Data(tensor(t, f, "blk.0.attn_q.weight")))
	hfq := st["model.layers.0.self_attn.q_proj.weight"].values(t)
	d := int(num("hidden_size"))
	row := func(m []float64, r int) []float64 { return m[r*d : (r+1)*d] }
	for h := 0; h < nHead; h++ {
		for i := 0; i < hd/2; i++ {
			require.Equal(t, row(hfq, h*hd+i), row(q, h*hd+2*i), "head %d row %d", h, 2*i)
			require.Equal(t, row(hfq, h*hd+i+hd/2), row(q, h*hd+2*i+1), "head %d row %d", h, 2*i+1)
		}
	}
	// blk.0.ffn_up straight from the source bytes, element by element.
	up := f.Data(tensor(t, f, "blk.0.ffn_up.weight"))
	upSrc := st["model.layers.0.mlp.up_proj.weight"].Data
	for i := 0; i < len(upSrc)/2; i++ {
		require.Equal(t, half(binary.LittleEndian.Uint16(upSrc[2*i:])), float64(math.Float32frombits(binary.LittleEndian.Uint32(up[4*i:]))))
	}
}

// checkQuantized compares a quantized tensor with its source per 32-element
// block: q8_0 rounds to d/2 with d = amax/127, q4_0 clamps to at most d with
// d = amax/8; the f16 scale adds a relative 2^-11 of amax.
func checkQuantized(t *testing.T, typ string, got, ref []float64, name string) {
	t.Helper()
	require.Len(t, got, len(ref), name)
	for b := 0; b < len(ref); b += 32 {
		amax := 0.0
		for _, v := range ref[b : b+32] {
			amax = math.Max(amax, math.Abs(v))
		}
		bound := amax/127/2 + amax*1e-3
		if typ == "q4_0" {
			bound = amax/8 + amax*1e-3
		}
		for i := b; i < b+32; i++ {
			if math.Abs(got[i]-ref[i]) > bound+1e-12 {
				t.Fatalf("%s %s: element %d = %g, source %g, bound %g", name, typ, i, got[i], ref[i], bound)
			}
		}
	}
}

func TestConvertShakespeareQuantized(t *testing.T) {
	src := filepath.Join(sharedModels(t), "shakespeare-relu-6m")
	st := readST(t, filepath.Join(src, "model.safetensors"))
	for _, c := range []struct {
		typ   ops.DType
		ftype uint64
	}{{ops.Q8_0, 7}, {ops.Q4_0, 2}} {
		t.Run(c.typ.String(), func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "s.gguf")
			require.NoError(t, Convert(src, out, Options{Type: c.typ}))
			f := openGGUF(t, out)
			assert.Equal(t, c.ftype, mustUint(t, f, "general.file_type"))
			for hf, s := range st {
				ti := tensor(t, f, ggufName(hf))
				ref := s.values(t)
				if len(s.Shape) == 1 {
					assert.Equal(t, ops.F32, ti.Type, ti.Name)
					assert.Equal(t, ref, f32s(f.Data(ti)), ti.Name)
					continue
				}
				require.Equal(t, c.typ, ti.Type, ti.Name)
				switch {
				case strings.HasSuffix(ti.Name, "attn_q.weight"):
					ref = interleave(ref, s.Shape[0], s.Shape[1], 8)
				case strings.HasSuffix(ti.Name, "attn_k.weight"):
					ref = interleave(ref, s.Shape[0], s.Shape[1], 4)
				}
				checkQuantized(t, c.typ.String(), dequant(t, c.typ.String(), f.Data(ti)), ref, ti.Name)
			}
		})
	}
}

// TestConvertSynthetic builds a model whose rows (40) do not fill q4_0 blocks,
// whose sources mix f32, bf16 and f16, whose head_dim (24) is not hidden/heads, whose
// vocabulary is larger than tokenizer.model and whose embeddings are tied.
func TestConvertSynthetic(t *testing.T) {
	const d, ff, vocab, nHead, nKV, hd = 40, 64, 1040, 2, 1, 24
	shak := filepath.Join(sharedModels(t), "shakespeare-relu-6m")
	rng := rand.New(rand.NewPCG(1, 2))
	mk := func(name, dtype string, shape ...int) stTensor {
		n := 1
		for _, s := range shape {
			n *= s
		}
		var b []byte
		for range n {
			v := float32(rng.NormFloat64() * 0.1)
			switch dtype {
			case "F32":
				b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
			case "BF16":
				b = binary.LittleEndian.AppendUint16(b, uint16(math.Float32bits(v)>>16))
			case "F16":
				b = binary.LittleEndian.AppendUint16(b, ops.F32ToF16(v))
			}
		}
		return stTensor{name, dtype, shape, b}
	}
	ts := []stTensor{
		mk("model.embed_tokens.weight", "F32", vocab, d),
		mk("model.norm.weight", "BF16", d),
		mk("model.layers.0.input_layernorm.weight", "F32", d),
		mk("model.layers.0.post_attention_layernorm.weight", "F16", d),
		mk("model.layers.0.self_attn.q_proj.weight", "BF16", nHead*hd, d),
		mk("model.layers.0.self_attn.k_proj.weight", "F32", nKV*hd, d),
		mk("model.layers.0.self_attn.v_proj.weight", "F16", nKV*hd, d),
		mk("model.layers.0.self_attn.o_proj.weight", "F16", d, nHead*hd),
		mk("model.layers.0.mlp.gate_proj.weight", "F16", ff, d),
		mk("model.layers.0.mlp.up_proj.weight", "BF16", ff, d),
		mk("model.layers.0.mlp.down_proj.weight", "F32", d, ff),
		mk("model.layers.0.self_attn.rotary_emb.inv_freq", "F32", hd/2),
	}
	dir := copyModel(t, shak, func(c map[string]any) {
		c["hidden_size"], c["intermediate_size"], c["vocab_size"] = d, ff, vocab
		c["num_hidden_layers"], c["num_attention_heads"], c["num_key_value_heads"] = 1, nHead, nKV
		c["head_dim"], c["tie_word_embeddings"], c["hidden_act"] = hd, true, "silu"
		delete(c, "rope_parameters")
		c["rope_theta"] = 500000.0
	}, func(map[string]stTensor) []stTensor { return ts })

	var logs []string
	out := filepath.Join(t.TempDir(), "syn.gguf")
	require.NoError(t, Convert(dir, out, Options{Type: ops.Q4_0, Progress: true, Logf: func(format string, a ...any) {
		logs = append(logs, fmt.Sprintf(format, a...))
	}}))
	f := openGGUF(t, out)
	require.Len(t, f.Tensors, 1+9+1)
	_, ok := f.Tensor("output.weight")
	assert.False(t, ok, "tied embeddings must not write output.weight")
	theta, err := f.Float("llama.rope.freq_base")
	require.NoError(t, err)
	assert.Equal(t, 500000.0, theta)
	assert.Equal(t, uint64(hd), mustUint(t, f, "llama.attention.key_length"))
	act, _ := f.String("pinfer.ffn_activation")
	assert.Equal(t, "silu", act)
	toks, err := f.Strings("tokenizer.ggml.tokens")
	require.NoError(t, err)
	require.Len(t, toks, vocab)
	assert.Equal(t, "[PAD1039]", toks[vocab-1])
	types, _ := f.Int32s("tokenizer.ggml.token_type")
	assert.Equal(t, int32(5), types[vocab-1]) // UNUSED

	joined := strings.Join(logs, "\n")
	for _, name := range []string{"token_embd.weight", "blk.0.attn_q.weight", "blk.0.ffn_up.weight"} {
		assert.Contains(t, joined, name)
	}
	assert.Contains(t, joined, "f16")
	assert.NotContains(t, joined, "ffn_down")

	for _, s := range ts[:11] {
		ti := tensor(t, f, ggufName(s.Name))
		ref := s.values(t)
		switch {
		case len(s.Shape) == 1:
			assert.Equal(t, ops.F32, ti.Type)
			assert.Equal(t, ref, f32s(f.Data(ti)), ti.Name)
			continue
		case ti.Name == "blk.0.ffn_down.weight":
			require.Equal(t, ops.Q4_0, ti.Type)
			checkQuantized(t, "q4_0", dequant(t, "q4_0", f.Data(ti)), ref, ti.Name)
			continue
		case ti.Name == "blk.0.attn_q.weight":
			ref = interleave(ref, nHead*hd, d, nHead)
		case ti.Name == "blk.0.attn_k.weight":
			ref = interleave(ref, nKV*hd, d, nKV)
		}
		require.Equal(t, ops.F16, ti.Type, ti.Name)
		got := dequant(t, "f16", f.Data(ti))
		for i := range ref {
			// f16 keeps 11 significant bits; the values are far from subnormal.
			require.InDelta(t, ref[i], got[i], math.Abs(ref[i])*math.Ldexp(1, -11)+1e-7, "%s[%d]", ti.Name, i)
		}
	}
}

func TestConvertMistralFixture(t *testing.T) {
	src := filepath.Join(sharedModels(t), "arch", "mistral-relu")
	out := filepath.Join(t.TempDir(), "m.gguf")
	require.NoError(t, Convert(src, out, Options{Type: ops.F16}))
	f := openGGUF(t, out)
	arch, _ := f.String("general.architecture")
	assert.Equal(t, "llama", arch)
	assert.Equal(t, uint64(1), mustUint(t, f, "general.file_type"))
	assert.Equal(t, uint64(readConfigMap(t, src)["sliding_window"].(float64)), mustUint(t, f, "pinfer.attention.sliding_window"))
	require.Len(t, f.Tensors, 2+9*2+1)
	st := readST(t, filepath.Join(src, "model.safetensors"))
	v := tensor(t, f, "blk.1.attn_v.weight")
	assert.Equal(t, ops.F16, v.Type)
	// f16 in, f16 out: the bytes themselves survive.
	assert.Equal(t, st["model.layers.1.self_attn.v_proj.weight"].Data, f.Data(v))
}

func TestConvertTiedDropsOutput(t *testing.T) {
	src := filepath.Join(sharedModels(t), "shakespeare-relu-6m")
	dir := copyModel(t, src, func(c map[string]any) { c["tie_word_embeddings"] = true },
		func(ts map[string]stTensor) []stTensor {
			var keep []stTensor
			for n, x := range ts {
				if n != "lm_head.weight" {
					keep = append(keep, x)
				}
			}
			return keep
		})
	out := filepath.Join(t.TempDir(), "tied.gguf")
	require.NoError(t, Convert(dir, out, Options{Type: ops.F16}))
	f := openGGUF(t, out)
	assert.Len(t, f.Tensors, 2+9*6)
	_, ok := f.Tensor("output.weight")
	assert.False(t, ok)
	tensor(t, f, "token_embd.weight")
}

func TestConvertErrors(t *testing.T) {
	src := filepath.Join(sharedModels(t), "shakespeare-relu-6m")
	out := func() string { return filepath.Join(t.TempDir(), "x.gguf") }
	without := func(name string) func(map[string]stTensor) []stTensor {
		return func(ts map[string]stTensor) []stTensor {
			var keep []stTensor
			for n, x := range ts {
				if n != name {
					keep = append(keep, x)
				}
			}
			return keep
		}
	}
	expectErr := func(t *testing.T, err error, parts ...string) {
		t.Helper()
		require.Error(t, err)
		assert.NotContains(t, err.Error(), "\n")
		for _, p := range parts {
			assert.Contains(t, err.Error(), p)
		}
	}

	t.Run("gpt2", func(t *testing.T) {
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"model_type": "gpt2", "n_embd": 64}`), 0o644))
		err := Convert(dir, out(), Options{})
		expectErr(t, err, filepath.Join(dir, "config.json")+`: model_type "gpt2" is not supported (supported: falcon, llama, mistral, mixtral, opt)`)
	})
	t.Run("missing field", func(t *testing.T) {
		dir := copyModel(t, src, func(c map[string]any) { delete(c, "hidden_size") }, nil)
		expectErr(t, Convert(dir, out(), Options{}), filepath.Join(dir, "config.json"), "hidden_size", "missing")
	})
	t.Run("scaled rope", func(t *testing.T) {
		dir := copyModel(t, src, func(c map[string]any) {
			c["rope_parameters"] = map[string]any{"rope_type": "llama3", "rope_theta": 5e5}
		}, nil)
		expectErr(t, Convert(dir, out(), Options{}), "config.json", "rope_parameters.rope_type", "llama3")
	})
	t.Run("missing tensor", func(t *testing.T) {
		dir := copyModel(t, src, nil, without("model.layers.3.mlp.up_proj.weight"))
		expectErr(t, Convert(dir, out(), Options{}), filepath.Join(dir, "model.safetensors"), `"model.layers.3.mlp.up_proj.weight"`)
	})
	t.Run("shape mismatch", func(t *testing.T) {
		dir := copyModel(t, src, func(c map[string]any) { c["intermediate_size"] = 512 }, nil)
		expectErr(t, Convert(dir, out(), Options{}), `"model.layers.0.mlp.gate_proj.weight"`, "[1024 256]", "expected [512 256]")
	})
	t.Run("unknown tensor", func(t *testing.T) {
		dir := copyModel(t, src, nil, func(ts map[string]stTensor) []stTensor {
			keep := []stTensor{{"model.layers.0.self_attn.q_proj.bias", "F16", []int{2}, []byte{0, 0, 0, 0}}}
			for _, x := range ts {
				keep = append(keep, x)
			}
			return keep
		})
		expectErr(t, Convert(dir, out(), Options{}), `"model.layers.0.self_attn.q_proj.bias"`)
	})
	t.Run("truncated safetensors", func(t *testing.T) {
		dir := copyModel(t, src, nil, nil)
		path := filepath.Join(dir, "model.safetensors")
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(path, b[:len(b)/2], 0o644))
		expectErr(t, Convert(dir, out(), Options{}), path)
	})
	t.Run("missing tokenizer", func(t *testing.T) {
		dir := copyModel(t, src, nil, nil)
		require.NoError(t, os.Remove(filepath.Join(dir, "tokenizer.model")))
		expectErr(t, Convert(dir, out(), Options{}), "tokenizer.model")
	})
	t.Run("output type", func(t *testing.T) {
		expectErr(t, Convert(src, out(), Options{Type: ops.Q4_1}), "q4_1")
	})
}
