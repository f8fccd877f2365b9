package tokenizer

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/pinfer/pinfer/gguf"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func splitWith(t *testing.T, pre, text string) []string {
	t.Helper()
	p, err := lookupPre(pre)
	require.NoError(t, err)
	return p.split(text)
}

// Falcon's pre-tokenizer is llama.cpp's three regexes, one after another:
// [\p{P}\$\+<=>\^~\|`]+ isolates runs of punctuation and ASCII symbols,
// GPT-2's regex splits the rest, and [0-9][0-9][0-9] cuts ASCII digit runs
// into threes from the left. The expected splits are worked out by hand from
// the regexes.
func TestFalconPreTokenizer(t *testing.T) {
	for _, c := range []struct {
		text string
		want []string
	}{
		{"Hello, world!", []string{"Hello", ",", " world", "!"}},
		{"1234567 apples", []string{"123", "456", "7", " apples"}},
		{" 12345", []string{" ", "123", "45"}},
		{"12 345 6789", []string{"12", " ", "345", " ", "678", "9"}},
		{"$1,000,000.50", []string{"$", "1", ",", "000", ",", "000", ".", "50"}},
		{"x...y!?", []string{"x", "...", "y", "!?"}},
		{"a+=b", []string{"a", "+=", "b"}},
		{"a <= b || c", []string{"a", " ", "<=", " b", " ", "||", " c"}},
		{" `x`", []string{" ", "`", "x", "`"}},
		// The apostrophe is punctuation, so GPT-2's contractions never apply.
		{"don't", []string{"don", "'", "t"}},
		// Unicode punctuation (P*) is isolated; a currency sign (Sc) is not.
		{"«Bonjour»—dit-il…", []string{"«", "Bonjour", "»—", "dit", "-", "il", "…"}},
		{"€5 ¥", []string{"€", "5", " ¥"}},
		// [0-9] is ASCII only: Arabic-Indic digits stay one number.
		{"١٢٣٤", []string{"١٢٣٤"}},
		{"hello   world", []string{"hello", "  ", " world"}},
		{"a\n\nb", []string{"a", "\n", "\n", "b"}},
		{"end  ", []string{"end", "  "}},
		{"🦙🦙 llama", []string{"🦙🦙", " llama"}},
	} {
		assert.Equal(t, c.want, splitWith(t, "falcon", c.text), "%q", c.text)
	}
}

// GPT-2's regex alone, and llama.cpp's default list (a file without
// tokenizer.ggml.pre): punctuation runs (no backtick), GPT-2's, \p{N}+,
// then digit triples.
func TestGPT2AndDefaultPreTokenizers(t *testing.T) {
	for _, c := range []struct {
		pre, text string
		want      []string
	}{
		{"gpt-2", "I'm here, they'll see 12345!", []string{"I", "'m", " here", ",", " they", "'ll", " see", " 12345", "!"}},
		// \s+(?!\S) leaves the last whitespace character before a word.
		{"gpt-2", "a  \tb", []string{"a", "  ", "\t", "b"}},
		{"gpt-2", "''s", []string{"''", "s"}},
		{"gpt-2", "IT'S", []string{"IT", "'", "S"}},
		{"default", " 12345", []string{" ", "123", "45"}},
		{"default", "don't", []string{"don", "'", "t"}},
		{"default", " `x", []string{" `", "x"}},
		{"default", "x²³", []string{"x", "²³"}},
	} {
		assert.Equal(t, c.want, splitWith(t, c.pre, c.text), "%s %q", c.pre, c.text)
	}
}

// Llama 3's regex: case-insensitive contractions, one non-letter before
// letters, numbers in threes, punctuation with the newlines after it, and
// whitespace up to the last newline.
func TestLlama3PreTokenizer(t *testing.T) {
	for _, c := range []struct {
		text string
		want []string
	}{
		{"Hello World's 1234567 !!\n\n  x", []string{"Hello", " World", "'s", " ", "123", "456", "7", " !!\n\n", " ", " x"}},
		{"IT'S", []string{"IT", "'S"}},
		{"a\n\n b", []string{"a", "\n\n", " b"}},
		{".hello", []string{".hello"}},
		{"x\n", []string{"x", "\n"}},
	} {
		assert.Equal(t, c.want, splitWith(t, "llama-bpe", c.text), "%q", c.text)
	}
}

// tinyBPE writes a small byte-level vocabulary: the 256 byte tokens after
// <|endoftext|>, then merges for "Hello" and " world".
func tinyBPE(t *testing.T, kv ...any) string {
	t.Helper()
	tokens := []string{"<|endoftext|>"}
	types := []int32{Control}
	for b := range 256 {
		tokens = append(tokens, byteChars[b])
		types = append(types, Normal)
	}
	merges := []string{"H e", "l l", "He ll", "Hell o", "Ġ w", "o r", "Ġw or", "l d", "Ġwor ld"}
	for _, m := range merges {
		tokens = append(tokens, strings.ReplaceAll(m, " ", ""))
		types = append(types, Normal)
	}
	w := gguf.NewWriter()
	base := []any{"tokenizer.ggml.model", "gpt2", "tokenizer.ggml.tokens", tokens,
		"tokenizer.ggml.token_type", types, "tokenizer.ggml.merges", merges}
	kv = append(base, kv...)
	for i := 0; i < len(kv); i += 2 {
		if kv[i+1] == nil {
			continue
		}
		require.NoError(t, w.Set(kv[i].(string), kv[i+1]))
	}
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	require.NoError(t, w.WriteFile(path, nil))
	return path
}

func openTiny(t *testing.T, kv ...any) (*Tokenizer, error) {
	path := tinyBPE(t, kv...)
	f, err := gguf.Open(path)
	require.NoError(t, err)
	defer f.Close()
	return FromGGUF(f)
}

func TestBPEFromGGUF(t *testing.T) {
	tok, err := openTiny(t, "tokenizer.ggml.pre", "falcon")
	require.NoError(t, err)
	v := tok.Vocab()
	assert.Equal(t, "gpt2", v.Model)
	assert.Equal(t, "falcon", v.Pre)
	assert.Len(t, v.Merges, 9)
	// llama.cpp's defaults for a gpt2 vocabulary: BOS and EOS 11, no UNK,
	// no BOS added, no space prefix.
	assert.Equal(t, 11, tok.BOS())
	assert.Equal(t, 11, tok.EOS())
	assert.Equal(t, -1, v.UNK)
	assert.False(t, v.AddBOS)
	assert.False(t, v.AddSpacePrefix)
	ids := tok.Encode("Hello world", false)
	assert.Equal(t, []int{260, 265}, ids)
	assert.Equal(t, "Hello world", tok.Decode(ids))
	assert.Equal(t, " world", tok.Piece(265))
	assert.Equal(t, []int{0, 260}, tok.EncodeSpecial("<|endoftext|>Hello", false))
	assert.Equal(t, "Hello", tok.Decode([]int{0, 260}))

	// add_bos_token and the ids, when the file gives them; Llama 3's
	// pre-tokenizer adds BOS by default.
	tok, err = openTiny(t, "tokenizer.ggml.pre", "gpt-2", "tokenizer.ggml.add_bos_token", true,
		"tokenizer.ggml.bos_token_id", uint32(0), "tokenizer.ggml.eos_token_id", uint32(0))
	require.NoError(t, err)
	assert.True(t, tok.Vocab().AddBOS)
	assert.Equal(t, []int{0, 260}, tok.Encode("Hello", true))
	tok, err = openTiny(t, "tokenizer.ggml.pre", "llama-bpe")
	require.NoError(t, err)
	assert.True(t, tok.Vocab().AddBOS)
	// Llama 3 takes a word that is a token whole without merging.
	assert.Equal(t, []int{260, 265}, tok.Encode("Hello world", false))

	// No tokenizer.ggml.pre: llama.cpp's default list.
	tok, err = openTiny(t)
	require.NoError(t, err)
	assert.Equal(t, "", tok.Vocab().Pre)
	assert.Equal(t, []int{260, 265}, tok.Encode("Hello world", false))
}

func TestBPEFromGGUFErrors(t *testing.T) {
	_, err := openTiny(t, "tokenizer.ggml.pre", "qwen-9")
	require.Error(t, err)
	msg := err.Error()
	assert.NotContains(t, msg, "\n")
	assert.Contains(t, msg, `metadata key "tokenizer.ggml.pre": pre-tokenizer "qwen-9" is not supported`)

	path := writeGGUF(t, [][2]string{{"tokenizer.ggml.model", "gpt2"}})
	f, err := gguf.Open(path)
	require.NoError(t, err)
	defer f.Close()
	_, err = FromGGUF(f)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "tokenizer.ggml.tokens")

	// A merge without a space is refused where the vocabulary is built.
	_, err = New(Vocab{Model: "gpt2", Tokens: []string{"a"}, Scores: []float32{0}, Types: []int32{Normal},
		BOS: -1, EOS: -1, UNK: -1, Merges: []string{"ab"}})
	require.ErrorContains(t, err, `merge 0 ("ab")`)
	_, err = New(Vocab{Model: "bert", Tokens: []string{"a"}, Scores: []float32{0}, Types: []int32{Normal}})
	require.ErrorContains(t, err, `model "bert" is not supported`)
}
