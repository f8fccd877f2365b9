package convert

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pinfer/pinfer/gguf"
	"github.com/pinfer/pinfer/ops"
	"github.com/pinfer/pinfer/tokenizer"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// convertLogged converts dir and returns the file and the notes logged.
func convertLogged(t *testing.T, dir string) (*gguf.File, string) {
	t.Helper()
	var logs []string
	out := filepath.Join(t.TempDir(), "out.gguf")
	require.NoError(t, Convert(dir, out, Options{Type: ops.F16, Logf: func(f string, a ...any) {
		logs = append(logs, fmt.Sprintf(f, a...))
	}}))
	return openGGUF(t, out), strings.Join(logs, "\n")
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, b, 0o644))
}

// Without max_position_embeddings, the context length is the transformers
// default of the family. The fixtures' configs were written by transformers
// from its defaults (the generator never set the field), so each fixture's
// own value is the reference: LlamaConfig 2048, MistralConfig and
// MixtralConfig 4096*32.
func TestConvertGapsMaxPositionsDefault(t *testing.T) {
	for _, name := range []string{"llama-relu", "mistral-relu", "mixtral-relu-moe"} {
		t.Run(name, func(t *testing.T) {
			src := filepath.Join(sharedModels(t), "arch", name)
			want := readConfigMap(t, src)["max_position_embeddings"].(float64)
			dir := copyModel(t, src, func(c map[string]any) { delete(c, "max_position_embeddings") }, nil)
			f, _ := convertLogged(t, dir)
			assert.Equal(t, uint64(want), mustUint(t, f, "llama.context_length"))
		})
	}
	// OPTConfig's default is 2048 too; the fixture's own table has 256+2
	// rows, so it is grown to the 2048+2 the default implies.
	t.Run("opt", func(t *testing.T) {
		src := filepath.Join(sharedModels(t), "arch", "opt-relu")
		dir := copyModel(t, src, func(c map[string]any) { delete(c, "max_position_embeddings") },
			func(ts map[string]stTensor) []stTensor {
				var keep []stTensor
				for n, x := range ts {
					if n == "model.decoder.embed_positions.weight" {
						rowBytes := len(x.Data) / x.Shape[0]
						x.Data = append(append([]byte(nil), x.Data...), make([]byte, (2050-x.Shape[0])*rowBytes)...)
						x.Shape = []int{2050, x.Shape[1]}
					}
					keep = append(keep, x)
				}
				return keep
			})
		f, _ := convertLogged(t, dir)
		assert.Equal(t, uint64(2048), mustUint(t, f, "opt.context_length"))
	})
}

// A tokenizer.model with more pieces than vocab_size: llama.cpp's converter
// warns "ignore tokens from N: id is out of range" and keeps the first
// vocab_size pieces. Here the Shakespeare model (1024 pieces) is cut to
// 1000 rows.
func TestConvertGapsVocabTruncated(t *testing.T) {
	const vocab = 1000
	src := filepath.Join(sharedModels(t), "shakespeare-relu-6m")
	full, _ := convertLogged(t, copyModel(t, src, nil, nil))
	dir := copyModel(t, src, func(c map[string]any) { c["vocab_size"] = vocab },
		func(ts map[string]stTensor) []stTensor {
			var keep []stTensor
			for n, x := range ts {
				if n == "model.embed_tokens.weight" || n == "lm_head.weight" {
					x.Data = x.Data[:vocab*len(x.Data)/x.Shape[0]]
					x.Shape = []int{vocab, x.Shape[1]}
				}
				keep = append(keep, x)
			}
			return keep
		})
	f, logs := convertLogged(t, dir)
	assert.Contains(t, logs, "tokenizer.model")
	assert.Contains(t, logs, "1000")
	for _, key := range []string{"tokenizer.ggml.tokens"} {
		want, _ := full.Strings(key)
		got, err := f.Strings(key)
		require.NoError(t, err)
		assert.Equal(t, want[:vocab], got)
	}
	wantS, _ := full.Float32s("tokenizer.ggml.scores")
	gotS, _ := f.Float32s("tokenizer.ggml.scores")
	assert.Equal(t, wantS[:vocab], gotS)
	wantT, _ := full.Int32s("tokenizer.ggml.token_type")
	gotT, _ := f.Int32s("tokenizer.ggml.token_type")
	assert.Equal(t, wantT[:vocab], gotT)
	assert.Equal(t, uint64(vocab), mustUint(t, f, "llama.vocab_size"))
	_, err := tokenizer.FromGGUF(f)
	require.NoError(t, err)
}

// Padding rows ([PADi], unused) get llama.cpp's score -10000: its
// _create_vocab_sentencepiece fills every slot with -10000 before the pieces.
func TestConvertGapsPaddingScore(t *testing.T) {
	dir := addedTokensDir(t, 1030)
	f, _ := convertLogged(t, dir)
	toks, _ := f.Strings("tokenizer.ggml.tokens")
	scores, _ := f.Float32s("tokenizer.ggml.scores")
	types, _ := f.Int32s("tokenizer.ggml.token_type")
	for id := 1024; id < 1030; id++ {
		assert.Equal(t, fmt.Sprintf("[PAD%d]", id), toks[id])
		assert.Equal(t, float32(-10000), scores[id], "score of %s", toks[id])
		assert.Equal(t, int32(tokenizer.Unused), types[id])
	}
}

// Special token ids as gguf-py's SpecialVocab finds them: tokenizer_config's
// <typ>_token text, looked up in tokenizer.json's added_tokens, before
// config.json's <typ>_token_id; special_tokens_map.json is not read; an id
// outside the vocabulary is skipped; a padding id is written as
// tokenizer.ggml.padding_token_id.
func TestConvertGapsSpecialTokens(t *testing.T) {
	const vocab = 1030
	key := func(f *gguf.File, k string) (uint64, bool) {
		if !f.Has(k) {
			return 0, false
		}
		v, err := f.Uint(k)
		require.NoError(t, err)
		return v, true
	}

	t.Run("tokenizer_config first", func(t *testing.T) {
		dir := addedTokensDir(t, vocab)
		cfg := readConfigMap(t, dir)
		cfg["eos_token_id"], cfg["pad_token_id"] = 2, 7
		writeJSON(t, filepath.Join(dir, "config.json"), cfg)
		writeJSON(t, filepath.Join(dir, "tokenizer.json"), map[string]any{"added_tokens": []any{
			map[string]any{"id": 0, "content": "<unk>", "special": true},
			map[string]any{"id": 1, "content": "<s>", "special": true},
			map[string]any{"id": 2, "content": "</s>", "special": true},
			map[string]any{"id": 1024, "content": "<pad>", "special": true},
			map[string]any{"id": 1025, "content": "<|end|>", "special": true},
			map[string]any{"id": 1026, "content": "<|end|>", "special": true}, // the first match counts
		}})
		writeJSON(t, filepath.Join(dir, "tokenizer_config.json"), map[string]any{
			"bos_token": map[string]any{"__type": "AddedToken", "content": "<s>"},
			"eos_token": "<|end|>",
			"unk_token": "<unk>",
			"pad_token": "<pad>",
		})
		writeJSON(t, filepath.Join(dir, "special_tokens_map.json"), map[string]any{"eos_token": "</s>", "pad_token": "<unk>"})
		f, _ := convertLogged(t, dir)
		for k, want := range map[string]uint64{"bos_token_id": 1, "eos_token_id": 1025, "unknown_token_id": 0, "padding_token_id": 1024} {
			got, ok := key(f, "tokenizer.ggml."+k)
			require.True(t, ok, k)
			assert.Equal(t, want, got, k)
		}
	})
	t.Run("config.json fills the rest", func(t *testing.T) {
		dir := addedTokensDir(t, vocab)
		cfg := readConfigMap(t, dir)
		cfg["eos_token_id"], cfg["pad_token_id"] = 3, 5
		writeJSON(t, filepath.Join(dir, "config.json"), cfg)
		writeJSON(t, filepath.Join(dir, "tokenizer.json"), map[string]any{"added_tokens": []any{
			map[string]any{"id": 5000, "content": "<|eos|>"}, // out of range: skipped
		}})
		// <unk> has no added_tokens entry; <|eos|>'s id is out of range.
		writeJSON(t, filepath.Join(dir, "tokenizer_config.json"), map[string]any{"eos_token": "<|eos|>", "unk_token": "<unk>"})
		f, logs := convertLogged(t, dir)
		assert.Contains(t, logs, "5000")
		for k, want := range map[string]uint64{"bos_token_id": 1, "eos_token_id": 3, "unknown_token_id": 0, "padding_token_id": 5} {
			got, ok := key(f, "tokenizer.ggml."+k)
			require.True(t, ok, k)
			assert.Equal(t, want, got, k)
		}
	})
	t.Run("no padding", func(t *testing.T) {
		for _, pad := range []any{nil, -1} {
			dir := addedTokensDir(t, vocab)
			cfg := readConfigMap(t, dir)
			cfg["pad_token_id"] = pad
			writeJSON(t, filepath.Join(dir, "config.json"), cfg)
			f, _ := convertLogged(t, dir)
			_, ok := key(f, "tokenizer.ggml.padding_token_id")
			assert.False(t, ok, "pad_token_id %v", pad)
		}
	})
}

// An added token with empty text would make a file no tokenizer loads
// (pinfer's refuses "token N is empty"); conversion skips it with a note and
// the slot keeps what it had.
func TestConvertGapsEmptyAddedToken(t *testing.T) {
	dir := addedTokensDir(t, 1030)
	writeJSON(t, filepath.Join(dir, "tokenizer_config.json"), map[string]any{"added_tokens_decoder": map[string]any{
		"1025": map[string]any{"content": "", "special": false},
		"1026": map[string]any{"content": "", "special": true},
		"1027": map[string]any{"content": "<|ok|>", "special": true},
	}})
	require.NoError(t, os.WriteFile(filepath.Join(dir, "added_tokens.json"), []byte(`{"": 1028}`), 0o644))
	f, logs := convertLogged(t, dir)
	assert.Equal(t, 3, strings.Count(logs, ": empty "), logs)
	toks, _ := f.Strings("tokenizer.ggml.tokens")
	for _, id := range []int{1025, 1026, 1028} {
		assert.Equal(t, fmt.Sprintf("[PAD%d]", id), toks[id])
	}
	assert.Equal(t, "<|ok|>", toks[1027])
	_, err := tokenizer.FromGGUF(f)
	require.NoError(t, err)
}

// Falcon's custom-code configs (model_type RefinedWebModel / RefinedWeb,
// RWForCausalLM, n_embed, n_head, n_layer, n_head_kv) convert as the
// transformers config they become under transformers'
// convert_custom_code_checkpoint.py: the same file, byte for byte, as the
// fixture's own config gives.
func TestConvertGapsFalconOldConfig(t *testing.T) {
	old := func(modelType string) func(map[string]any) {
		return func(c map[string]any) {
			c["model_type"], c["architectures"] = modelType, []string{"RWForCausalLM"}
			c["n_head"], c["n_layer"], c["n_embed"] = c["num_attention_heads"], c["num_hidden_layers"], c["hidden_size"]
			if c["new_decoder_architecture"] == true {
				c["n_head_kv"] = c["num_kv_heads"]
			}
			for _, k := range []string{"num_attention_heads", "num_hidden_layers", "hidden_size", "num_kv_heads",
				"new_decoder_architecture", "num_ln_in_parallel_attn", "max_position_embeddings"} {
				delete(c, k)
			}
		}
	}
	for _, tc := range []struct{ fixture, modelType string }{
		{"falcon-relu", "RefinedWebModel"}, {"falcon40b-relu", "RefinedWeb"},
	} {
		t.Run(tc.modelType, func(t *testing.T) {
			src := filepath.Join(sharedModels(t), "arch", tc.fixture)
			ref := filepath.Join(t.TempDir(), "ref.gguf")
			require.NoError(t, Convert(copyModel(t, src, nil, nil), ref, Options{Type: ops.F32}))
			got := filepath.Join(t.TempDir(), "old.gguf")
			require.NoError(t, Convert(copyModel(t, src, old(tc.modelType), nil), got, Options{Type: ops.F32}))
			a, err := os.ReadFile(ref)
			require.NoError(t, err)
			b, err := os.ReadFile(got)
			require.NoError(t, err)
			assert.True(t, bytes.Equal(a, b), "the old config's GGUF differs from the new config's")
		})
	}
	t.Run("conflicting names", func(t *testing.T) {
		src := filepath.Join(sharedModels(t), "arch", "falcon-relu")
		dir := copyModel(t, src, func(c map[string]any) { c["n_head"] = 8 }, nil)
		err := Convert(dir, filepath.Join(t.TempDir(), "x.gguf"), Options{})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "n_head is 8 but num_attention_heads is 4")
		assert.NotContains(t, err.Error(), "\n")
	})
}
