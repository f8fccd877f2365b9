package convert

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/pinfer/pinfer/gguf"
	"github.com/pinfer/pinfer/ops"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func convertArch(t *testing.T, name string) (*gguf.File, map[string]stTensor, map[string]any) {
	t.Helper()
	src := filepath.Join(sharedModels(t), "arch", name)
	out := filepath.Join(t.TempDir(), name+".gguf")
	require.NoError(t, Convert(src, out, Options{Type: ops.F32}))
	return openGGUF(t, out), readST(t, filepath.Join(src, "model.safetensors")), readConfigMap(t, src)
}

func rowsOf(m []float64, cols, lo, n int) []float64 { return m[lo*cols : (lo+n)*cols] }

func str(t *testing.T, f *gguf.File, key string) string {
	t.Helper()
	s, err := f.String(key)
	require.NoError(t, err, key)
	return s
}

// Falcon-40B's query_key_value is, per transformers, a view of n_kv groups
// of (n_head/n_kv q heads, one k head, one v head); llama.cpp's attn_qkv holds
// all q heads, then the k heads, then the v heads.
func TestConvertFalcon40B(t *testing.T) {
	f, st, cfg := convertArch(t, "falcon40b-relu")
	d, nHead, nKV := int(cfg["hidden_size"].(float64)), int(cfg["num_attention_heads"].(float64)), int(cfg["num_kv_heads"].(float64))
	hd, per := d/nHead, nHead/nKV
	assert.Equal(t, "falcon", str(t, f, "general.architecture"))
	assert.Equal(t, "jploski", str(t, f, "falcon.tensor_data_layout"))
	assert.Equal(t, "relu", str(t, f, "pinfer.ffn_activation"))
	assert.Equal(t, uint64(nKV), mustUint(t, f, "falcon.attention.head_count_kv"))
	assert.Equal(t, uint64(nHead), mustUint(t, f, "falcon.attention.head_count"))
	assert.Equal(t, uint64(cfg["ffn_hidden_size"].(float64)), mustUint(t, f, "falcon.feed_forward_length"))

	for l := 0; l < 2; l++ {
		src := st[fmt.Sprintf("transformer.h.%d.self_attention.query_key_value.weight", l)].values(t)
		got := f32s(f.Data(tensor(t, f, fmt.Sprintf("blk.%d.attn_qkv.weight", l))))
		require.Len(t, got, len(src))
		group := func(g, slot int) []float64 { return rowsOf(src, d, (g*(per+2)+slot)*hd, hd) }
		for h := 0; h < nHead; h++ {
			require.Equal(t, group(h/per, h%per), rowsOf(got, d, h*hd, hd), "layer %d q head %d", l, h)
		}
		for g := 0; g < nKV; g++ {
			require.Equal(t, group(g, per), rowsOf(got, d, (nHead+g)*hd, hd), "layer %d k head %d", l, g)
			require.Equal(t, group(g, per+1), rowsOf(got, d, (nHead+nKV+g)*hd, hd), "layer %d v head %d", l, g)
		}
		// llama.cpp's names: ln_mlp is attn_norm, ln_attn attn_norm_2.
		for hf, gg := range map[string]string{"ln_mlp": "attn_norm", "ln_attn": "attn_norm_2"} {
			for _, part := range []string{".weight", ".bias"} {
				assert.Equal(t, st[fmt.Sprintf("transformer.h.%d.%s%s", l, hf, part)].values(t),
					f32s(f.Data(tensor(t, f, fmt.Sprintf("blk.%d.%s%s", l, gg, part)))))
			}
		}
	}
	assert.Equal(t, st["lm_head.weight"].values(t), f32s(f.Data(tensor(t, f, "output.weight"))))
	assert.Len(t, f.Tensors, 1+2*(4+4)+2+1)
}

// Falcon-7B's multi-query layout is already q heads, k, v: one kv head.
func TestConvertFalcon7B(t *testing.T) {
	f, st, _ := convertArch(t, "falcon-relu")
	assert.Equal(t, uint64(1), mustUint(t, f, "falcon.attention.head_count_kv"))
	assert.Equal(t, st["transformer.h.1.self_attention.query_key_value.weight"].values(t),
		f32s(f.Data(tensor(t, f, "blk.1.attn_qkv.weight"))))
	assert.Equal(t, []uint64{128, 192}, tensor(t, f, "blk.1.attn_qkv.weight").Dims)
	for _, name := range []string{"output.weight", "blk.0.attn_norm_2.weight"} {
		_, ok := f.Tensor(name)
		assert.False(t, ok, name)
	}
	assert.Len(t, f.Tensors, 1+2*(2+4)+2)
}

// Mixtral's experts stack into llama.cpp's 3-D tensors: expert e is rows
// [e*rows, (e+1)*rows) of ffn_{gate,up,down}_exps.
func TestConvertMixtral(t *testing.T) {
	f, st, cfg := convertArch(t, "mixtral-relu-moe")
	d, ff, nE := int(cfg["hidden_size"].(float64)), int(cfg["intermediate_size"].(float64)), int(cfg["num_local_experts"].(float64))
	assert.Equal(t, "llama", str(t, f, "general.architecture"))
	assert.Equal(t, uint64(nE), mustUint(t, f, "llama.expert_count"))
	assert.Equal(t, uint64(cfg["num_experts_per_tok"].(float64)), mustUint(t, f, "llama.expert_used_count"))
	assert.False(t, f.Has("pinfer.attention.sliding_window"), "sliding_window null means no window")
	for _, c := range []struct {
		w, gg      string
		dims       []uint64
		rows, cols int
	}{
		{"w1", "ffn_gate_exps", []uint64{uint64(d), uint64(ff), uint64(nE)}, ff, d},
		{"w3", "ffn_up_exps", []uint64{uint64(d), uint64(ff), uint64(nE)}, ff, d},
		{"w2", "ffn_down_exps", []uint64{uint64(ff), uint64(d), uint64(nE)}, d, ff},
	} {
		ti := tensor(t, f, "blk.1."+c.gg+".weight")
		require.Equal(t, c.dims, ti.Dims, c.gg)
		got := f32s(f.Data(ti))
		for e := 0; e < nE; e++ {
			want := st[fmt.Sprintf("model.layers.1.block_sparse_moe.experts.%d.%s.weight", e, c.w)].values(t)
			require.Equal(t, want, rowsOf(got, c.cols, e*c.rows, c.rows), "%s expert %d", c.gg, e)
		}
	}
	router := tensor(t, f, "blk.0.ffn_gate_inp.weight")
	assert.Equal(t, []uint64{uint64(d), uint64(nE)}, router.Dims)
	assert.Equal(t, st["model.layers.0.block_sparse_moe.gate.weight"].values(t), f32s(f.Data(router)))
	_, ok := f.Tensor("blk.0.ffn_gate.weight")
	assert.False(t, ok)
}

func TestConvertOPT(t *testing.T) {
	f, st, cfg := convertArch(t, "opt-relu")
	assert.Equal(t, "opt", str(t, f, "general.architecture"))
	for key, field := range map[string]string{
		"opt.context_length": "max_position_embeddings", "opt.embedding_length": "hidden_size",
		"opt.block_count": "num_hidden_layers", "opt.feed_forward_length": "ffn_dim", "opt.attention.head_count": "num_attention_heads",
	} {
		assert.Equal(t, uint64(cfg[field].(float64)), mustUint(t, f, key), key)
	}
	pos := tensor(t, f, "position_embd.weight")
	assert.Equal(t, []uint64{128, uint64(cfg["max_position_embeddings"].(float64)) + 2}, pos.Dims)
	assert.Equal(t, st["model.decoder.embed_positions.weight"].values(t), f32s(f.Data(pos)))
	for hf, gg := range map[string]string{
		"model.decoder.layers.1.fc1.bias": "blk.1.ffn_up.bias", "model.decoder.layers.1.fc2.weight": "blk.1.ffn_down.weight",
		"model.decoder.layers.0.self_attn.out_proj.bias": "blk.0.attn_output.bias",
		"model.decoder.layers.0.final_layer_norm.weight": "blk.0.ffn_norm.weight",
		"model.decoder.final_layer_norm.bias":            "output_norm.bias",
	} {
		assert.Equal(t, st[hf].values(t), f32s(f.Data(tensor(t, f, gg))), gg)
	}
	_, ok := f.Tensor("output.weight")
	assert.False(t, ok, "OPT ties its output to the embeddings")
	assert.Len(t, f.Tensors, len(st))
}

func TestConvertFamilyErrors(t *testing.T) {
	out := func() string { return filepath.Join(t.TempDir(), "x.gguf") }
	arch := func(name string) string { return filepath.Join(sharedModels(t), "arch", name) }
	cases := []struct {
		name, fixture string
		cfg           func(map[string]any)
		drop          string
		want          []string
	}{
		{"falcon alibi", "falcon-relu", func(c map[string]any) { c["alibi"] = true }, "", []string{"config.json", "alibi is true"}},
		{"falcon sequential", "falcon-relu", func(c map[string]any) { c["parallel_attn"] = false }, "", []string{"config.json", "parallel_attn is false"}},
		{"falcon kv groups", "falcon40b-relu", func(c map[string]any) { c["num_kv_heads"] = 3 }, "", []string{"num_kv_heads is 3, which does not divide num_attention_heads 4"}},
		{"opt post-norm", "opt-relu", func(c map[string]any) { c["do_layer_norm_before"] = false }, "", []string{"do_layer_norm_before is false"}},
		{"opt projection", "opt-relu", func(c map[string]any) { c["word_embed_proj_dim"] = 64 }, "", []string{"word_embed_proj_dim is 64"}},
		{"mixtral top-k", "mixtral-relu-moe", func(c map[string]any) { c["num_experts_per_tok"] = 5 }, "", []string{"num_experts_per_tok is 5, more than num_local_experts 4"}},
		{"mixtral expert missing", "mixtral-relu-moe", nil, "model.layers.1.block_sparse_moe.experts.3.w2.weight", []string{"model.safetensors", `"model.layers.1.block_sparse_moe.experts.3.w2.weight"`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var edit func(map[string]stTensor) []stTensor
			if c.drop != "" {
				edit = func(ts map[string]stTensor) []stTensor {
					var keep []stTensor
					for n, x := range ts {
						if n != c.drop {
							keep = append(keep, x)
						}
					}
					return keep
				}
			}
			err := Convert(copyModel(t, arch(c.fixture), c.cfg, edit), out(), Options{})
			require.Error(t, err)
			require.NotContains(t, err.Error(), "\n")
			for _, w := range c.want {
				require.Contains(t, err.Error(), w)
			}
		})
	}
	t.Run("falcon stray tensor", func(t *testing.T) {
		dir := copyModel(t, arch("falcon-relu"), nil, func(ts map[string]stTensor) []stTensor {
			keep := []stTensor{{"transformer.h.0.self_attention.query_key_value.bias", "F16", []int{2}, []byte{0, 0, 0, 0}}}
			for _, x := range ts {
				keep = append(keep, x)
			}
			return keep
		})
		err := Convert(dir, out(), Options{})
		require.ErrorContains(t, err, `tensor "transformer.h.0.self_attention.query_key_value.bias" has no place in a falcon GGUF (model_type "falcon")`)
	})
}
