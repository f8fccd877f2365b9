package tokenizer

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// llama.cpp parses special tokens in a prompt (llama-tokenize by default,
// llama-cli for -p): the text of a control token becomes that token. For
// Phi-3 it also drops the whitespace after every special token but <unk>,
// <s> and <|endoftext|> (the rstrip attribute it sets by the model's name),
// so a chat turn is these 8 ids in llama.cpp. Encode spelled <|user|> out
// as "<", "|", "user", ... (24 ids).
func TestEncodeSpecialPhi3ChatTurnReview(t *testing.T) {
	tok := loadGGUF(t, "vocab-phi-3/ggml-vocab-phi-3.gguf")
	turn := "<|user|>\nSYS\nHI<|end|>\n<|assistant|>\n"
	assert.Equal(t, []int{1, 32010, 317, 21554, 13, 17628, 32007, 32001}, tok.EncodeSpecial(turn, true))
	assert.Equal(t, []int{32010, 317, 21554, 13, 17628, 32007, 32001}, tok.EncodeSpecial(turn, false))
	assert.Equal(t, []int{1}, tok.EncodeSpecial("", true))
	assert.Empty(t, tok.EncodeSpecial("", false))
}

// llama.cpp splits the text at special tokens and encodes each stretch of
// text on its own, with the dummy-prefix space: so a text, a special token
// and another text are the first text's ids, the token, and the second's,
// each as llama.cpp's test vocabulary files give them.
func TestEncodeSpecialSplitsLikeLlamaCppReview(t *testing.T) {
	for _, tc := range []struct {
		vocab   string
		special string
		id      int
		rstrip  bool
	}{
		{"vocab-llama-spm/ggml-vocab-llama-spm", "</s>", 2, false},
		{"vocab-llama-spm/ggml-vocab-llama-spm", "<s>", 1, false},
		{"vocab-phi-3/ggml-vocab-phi-3", "<s>", 1, false},        // exempt from Phi-3's rstrip
		{"vocab-phi-3/ggml-vocab-phi-3", "<|end|>", 32007, true}, // drops the whitespace after it
		{"vocab-phi-3/ggml-vocab-phi-3", "</s>", 2, true},        // user-defined, also rstrip
	} {
		tok := loadGGUF(t, tc.vocab+".gguf")
		cases := readVocabTests(t, filepath.Join(modelsDir(t), tc.vocab+".gguf"))
		n := 0
		for i, a := range cases {
			b := cases[(i+7)%len(cases)]
			if tc.rstrip && strings.TrimLeft(b.text, " \t\n\v\f\r") != b.text {
				continue
			}
			want := append(append(append([]int{}, a.ids...), tc.id), b.ids...)
			assert.Equal(t, want, tok.EncodeSpecial(a.text+tc.special+b.text, false), "%s: %q + %s + %q", tc.vocab, a.text, tc.special, b.text)
			n++
		}
		require.Greater(t, n, 20)
		// Without special tokens in it, a text is encoded as Encode does.
		for _, c := range cases {
			assert.Equal(t, append([]int{1}, c.ids...), tok.EncodeSpecial(c.text, true), "%q", c.text)
		}
	}
}

// llama-tokenize prints a piece as llama.cpp's token_to_piece with special
// tokens rendered: an unknown or control token as its text (<unk>, not
// SentencePiece's " ⁇ ", which only Decode prints), a user-defined one as
// it is.
func TestPieceSpecialReview(t *testing.T) {
	tok := loadGGUF(t, "vocab-llama-spm/ggml-vocab-llama-spm.gguf")
	assert.Equal(t, "<unk>", tok.Piece(0))
	assert.Equal(t, "<s>", tok.Piece(1))
	assert.Equal(t, " \u2047 ", tok.Decode([]int{0}))
	phi := loadGGUF(t, "vocab-phi-3/ggml-vocab-phi-3.gguf")
	assert.Equal(t, "</s>", phi.Piece(2))
	assert.Equal(t, "<|end|>", phi.Piece(32007))
	v := phi.Vocab()
	last := len(v.Tokens) - 1
	require.Equal(t, int32(Unknown), v.Types[last])
	assert.Equal(t, v.Tokens[last], phi.Piece(last))
}
