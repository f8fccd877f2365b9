package convert

import (
	"encoding/json"
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

// An output path that is one of the checkpoint's own files must be refused
// before anything is written: renaming the GGUF over model.safetensors (or
// config.json, tokenizer.model) would destroy the checkpoint. The files must
// keep the fixture's bytes, and no temporary file may be left behind.
func TestConvertRefusesOutputThatIsAnInput(t *testing.T) {
	src := filepath.Join(sharedModels(t), "shakespeare-relu-6m")
	dir := copyModel(t, src, nil, nil)
	for _, name := range []string{"model.safetensors", "config.json", "tokenizer.model"} {
		t.Run(name, func(t *testing.T) {
			in := filepath.Join(dir, name)
			before, err := os.ReadFile(in)
			require.NoError(t, err)
			err = Convert(dir, in, Options{Type: ops.F16})
			require.Error(t, err)
			assert.NotContains(t, err.Error(), "\n")
			assert.Contains(t, err.Error(), in)
			after, err := os.ReadFile(in)
			require.NoError(t, err)
			require.Equal(t, before, after, "%s was overwritten", name)
		})
	}
	// Through a symlink too: the link names the same file.
	link := filepath.Join(t.TempDir(), "out.gguf")
	require.NoError(t, os.Symlink(filepath.Join(dir, "model.safetensors"), link))
	require.Error(t, Convert(dir, link, Options{Type: ops.F16}))
	st := readST(t, filepath.Join(dir, "model.safetensors"))
	assert.Len(t, st, 2+9*6+1)

	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	assert.ElementsMatch(t, []string{"config.json", "tokenizer.model", "model.safetensors"}, names)
}

// addedTokensDir is the Shakespeare checkpoint with its vocabulary grown by
// rows: the embedding and output gain zero rows for the new ids.
func addedTokensDir(t *testing.T, vocab int) string {
	t.Helper()
	src := filepath.Join(sharedModels(t), "shakespeare-relu-6m")
	return copyModel(t, src, func(c map[string]any) { c["vocab_size"] = vocab },
		func(ts map[string]stTensor) []stTensor {
			var keep []stTensor
			for n, x := range ts {
				if n == "model.embed_tokens.weight" || n == "lm_head.weight" {
					extra := (vocab - x.Shape[0]) * x.Shape[1] * 2 // f16
					x.Data = append(append([]byte(nil), x.Data...), make([]byte, extra)...)
					x.Shape = []int{vocab, x.Shape[1]}
				}
				keep = append(keep, x)
			}
			return keep
		})
}

// Added tokens (tokenizer_config.json's added_tokens_decoder and
// added_tokens.json) must land in their slots as llama.cpp's converter puts
// them. The reference is llama.cpp's own conversion of Phi-3 (a
// SentencePiece model plus added tokens): ggml-vocab-phi-3.gguf. Phi-3's
// added_tokens_decoder marks <unk> and <s> special, </s> not special, and
// its <|...|> tokens at 32000-32010; here they sit at 1024-1034 of a
// 1038-token vocabulary.
func TestConvertAddedTokensAsLlamaCpp(t *testing.T) {
	const base, vocab = 1024, 1038
	ref, err := gguf.Open(filepath.Join(sharedModels(t), "vocab-phi-3", "ggml-vocab-phi-3.gguf"))
	require.NoError(t, err)
	defer ref.Close()
	refTok, _ := ref.Strings("tokenizer.ggml.tokens")
	refType, _ := ref.Int32s("tokenizer.ggml.token_type")
	refScore, _ := ref.Float32s("tokenizer.ggml.scores")

	dir := addedTokensDir(t, vocab)
	decoder := map[string]any{
		"0": map[string]any{"content": "<unk>", "special": true},
		"1": map[string]any{"content": "<s>", "special": true},
		"2": map[string]any{"content": "</s>", "special": false, "rstrip": true},
		// A user-defined token: llama.cpp pre-normalizes its "▁" to spaces.
		"1036": map[string]any{"content": "\u2581Hi", "special": false},
		// Beyond vocab_size: skipped, as llama.cpp skips it.
		"5000": map[string]any{"content": "<|far|>", "special": true},
	}
	for i := 0; i <= 10; i++ {
		// Phi-3 marks them special; some here are not, and still look it.
		decoder[itoa(base+i)] = map[string]any{"content": refTok[32000+i], "special": i%2 == 0}
	}
	cfg, err := json.Marshal(map[string]any{"added_tokens_decoder": decoder, "add_bos_token": true, "add_eos_token": false})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), cfg, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "added_tokens.json"), []byte(`{"\u2581Hello\u2581world": 1035, "<toolong>": 9999}`), 0o644))

	out := filepath.Join(t.TempDir(), "added.gguf")
	var logs []string
	require.NoError(t, Convert(dir, out, Options{Type: ops.F16, Logf: func(f string, a ...any) {
		logs = append(logs, f)
	}}))
	f := openGGUF(t, out)
	toks, err := f.Strings("tokenizer.ggml.tokens")
	require.NoError(t, err)
	types, _ := f.Int32s("tokenizer.ggml.token_type")
	scores, _ := f.Float32s("tokenizer.ggml.scores")
	require.Len(t, toks, vocab)

	for i := 0; i < 3; i++ {
		assert.Equal(t, refTok[i], toks[i], "id %d", i)
		assert.Equal(t, refType[i], types[i], "type of %q", toks[i])
		assert.Equal(t, refScore[i], scores[i], "score of %q", toks[i])
	}
	for i := 0; i <= 10; i++ {
		id := base + i
		assert.Equal(t, refTok[32000+i], toks[id], "id %d", id)
		assert.Equal(t, refType[32000+i], types[id], "type of %q", toks[id])
		assert.Equal(t, refScore[32000+i], scores[id], "score of %q", toks[id])
	}
	// added_tokens.json: user-defined, score -1000, the text as written.
	assert.Equal(t, "\u2581Hello\u2581world", toks[1035])
	assert.Equal(t, int32(tokenizer.UserDefined), types[1035])
	assert.Equal(t, float32(-1000), scores[1035])
	assert.Equal(t, " Hi", toks[1036])
	assert.Equal(t, int32(tokenizer.UserDefined), types[1036])
	assert.Equal(t, "[PAD1037]", toks[1037])
	assert.Equal(t, int32(tokenizer.Unused), types[1037])
	assert.Len(t, logs, 2, "the two out-of-range ids are noted")

	addEOS, err := f.Bool("tokenizer.ggml.add_eos_token")
	require.NoError(t, err)
	assert.False(t, addEOS)

	// The vocabulary still loads, and a control token is one id.
	tk, err := tokenizer.FromGGUF(f)
	require.NoError(t, err)
	_ = tk
}

// tokenizer_config.json's add_bos_token is what llama.cpp's converter writes
// as tokenizer.ggml.add_bos_token.
func TestConvertAddBOSFromTokenizerConfig(t *testing.T) {
	dir := copyModel(t, filepath.Join(sharedModels(t), "shakespeare-relu-6m"), nil, nil)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), []byte(`{"add_bos_token": false, "add_eos_token": true}`), 0o644))
	out := filepath.Join(t.TempDir(), "nobos.gguf")
	require.NoError(t, Convert(dir, out, Options{Type: ops.F16}))
	f := openGGUF(t, out)
	bos, err := f.Bool("tokenizer.ggml.add_bos_token")
	require.NoError(t, err)
	assert.False(t, bos)
	eos, err := f.Bool("tokenizer.ggml.add_eos_token")
	require.NoError(t, err)
	assert.True(t, eos)
}

// llama.cpp's converter keeps the MoE router (ffn_gate_inp) and a learned
// position table (position_embd) in f32 whatever --outtype says, as
// llama-quantize never quantizes them.
func TestConvertKeepsRouterAndPositionsF32(t *testing.T) {
	for _, c := range []struct{ fixture, name string }{
		{"mixtral-relu-moe", "blk.0.ffn_gate_inp.weight"},
		{"opt-relu", "position_embd.weight"},
	} {
		for _, typ := range []ops.DType{ops.F16, ops.Q8_0} {
			t.Run(c.fixture+"/"+typ.String(), func(t *testing.T) {
				out := filepath.Join(t.TempDir(), "m.gguf")
				require.NoError(t, Convert(filepath.Join(sharedModels(t), "arch", c.fixture), out, Options{Type: typ, Logf: func(string, ...any) {}}))
				f := openGGUF(t, out)
				assert.Equal(t, ops.F32, tensor(t, f, c.name).Type)
				assert.Equal(t, typ, tensor(t, f, "blk.0.attn_q.weight").Type)
			})
		}
	}
}

// Shards whose index is missing are read as llama.cpp's converter reads
// them (every model*.safetensors); the converted tensors are the single
// file's, byte for byte at f16.
func TestConvertShardsWithoutIndex(t *testing.T) {
	src := filepath.Join(sharedModels(t), "shakespeare-relu-6m")
	dir := copyModel(t, src, nil, nil)
	ts := readST(t, filepath.Join(dir, "model.safetensors"))
	require.NoError(t, os.Remove(filepath.Join(dir, "model.safetensors")))
	var a, b []stTensor
	for n, x := range ts {
		if strings.Contains(n, "layers.") && n < "model.layers.3" {
			a = append(a, x)
		} else {
			b = append(b, x)
		}
	}
	writeST(t, filepath.Join(dir, "model-00001-of-00002.safetensors"), a)
	writeST(t, filepath.Join(dir, "model-00002-of-00002.safetensors"), b)
	out := filepath.Join(t.TempDir(), "s.gguf")
	require.NoError(t, Convert(dir, out, Options{Type: ops.F16}))
	f := openGGUF(t, out)
	require.Len(t, f.Tensors, 2+9*6+1)
	for hf, x := range ts {
		if strings.Contains(hf, "q_proj") || strings.Contains(hf, "k_proj") {
			continue // permuted
		}
		ti := tensor(t, f, ggufName(hf))
		if len(x.Shape) == 2 {
			assert.Equal(t, x.Data, f.Data(ti), hf)
		}
	}
}

// A tensor that a shard holds but the index leaves out is converted, as
// llama.cpp's converter (which reads every tensor of every shard) does;
// before, an untied lm_head left out of weight_map was silently replaced by
// the embeddings.
func TestConvertShardTensorMissingFromIndex(t *testing.T) {
	src := filepath.Join(sharedModels(t), "shakespeare-relu-6m")
	dir := copyModel(t, src, nil, nil)
	ts := readST(t, filepath.Join(dir, "model.safetensors"))
	require.NoError(t, os.Remove(filepath.Join(dir, "model.safetensors")))
	var list []stTensor
	wm := map[string]string{}
	for n, x := range ts {
		list = append(list, x)
		if n != "lm_head.weight" {
			wm[n] = "model-00001-of-00001.safetensors"
		}
	}
	writeST(t, filepath.Join(dir, "model-00001-of-00001.safetensors"), list)
	idx, err := json.Marshal(map[string]any{"metadata": map[string]any{}, "weight_map": wm})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "model.safetensors.index.json"), idx, 0o644))
	out := filepath.Join(t.TempDir(), "s.gguf")
	require.NoError(t, Convert(dir, out, Options{Type: ops.F16, Logf: func(f string, a ...any) { t.Logf(f, a...) }}))
	f := openGGUF(t, out)
	assert.Equal(t, ts["lm_head.weight"].Data, f.Data(tensor(t, f, "output.weight")))
}

func itoa(i int) string {
	b, _ := json.Marshal(i)
	return string(b)
}
