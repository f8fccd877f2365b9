package tokenizer

import (
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func streamAll(tok *Tokenizer, ids []int, first bool) (string, []string) {
	s := tok.NewStream(first)
	var parts []string
	for _, id := range ids {
		parts = append(parts, s.Add(id))
	}
	parts = append(parts, s.Flush())
	return strings.Join(parts, ""), parts
}

func TestStreamMatchesDecode(t *testing.T) {
	tok := loadGGUF(t, "vocab-llama-spm/ggml-vocab-llama-spm.gguf")
	cases := readVocabTests(t, filepath.Join(modelsDir(t), "vocab-llama-spm/ggml-vocab-llama-spm.gguf"))
	for i, c := range cases {
		text, parts := streamAll(tok, c.ids, true)
		assert.Equal(t, tok.Decode(c.ids), text, "case %d", i)
		assert.Equal(t, c.text, text, "case %d", i)
		for _, p := range parts {
			assert.True(t, utf8.ValidString(p), "case %d: part %q split a character", i, p)
		}
	}
}

func TestStreamByteTokens(t *testing.T) {
	tok := loadGGUF(t, "stories260K/stories260K.gguf")
	// U+12397 (F0 92 8E 97) and U+1340D (F0 93 90 8D) are not in the
	// 512-token vocabulary, so each is four byte tokens (id = byte + 3).
	ids := []int{1, 410, 0xF0 + 3, 0x92 + 3, 0x8E + 3, 0x97 + 3, 0xF0 + 3, 0x93 + 3, 0x90 + 3, 0x8D + 3}
	require.Equal(t, ids, tok.Encode("𒎗𓐍", true))
	text, parts := streamAll(tok, ids, true)
	assert.Equal(t, "𒎗𓐍", text)
	assert.Equal(t, []string{"", "", "", "", "", "𒎗", "", "", "", "𓐍", ""}, parts)

	// Continuing after a prompt keeps the leading space.
	text, _ = streamAll(tok, tok.Encode("hello world!", false), false)
	assert.Equal(t, " hello world!", text)

	// A partial character is released by Flush, and bytes that can never
	// become valid are released at once, as Decode prints them.
	s := tok.NewStream(false)
	assert.Equal(t, "", s.Add(0xE2+3))
	assert.Equal(t, "\xe2", s.Flush())
	assert.Equal(t, "\x80", s.Add(0x80+3))
	assert.Equal(t, "\xe2A", s.Add(0xE2+3)+s.Add(tok.Encode("A", false)[1]))
	assert.Equal(t, "", s.Flush())
}

func TestDecodeRules(t *testing.T) {
	tok := loadGGUF(t, "vocab-llama-spm/ggml-vocab-llama-spm.gguf")
	// Ids from ggml-vocab-llama-spm.gguf.out: " Hello" is ▁ (29871), ▁Hello (15043).
	// Only the first piece loses its ▁: the second keeps the text's space.
	assert.Equal(t, " Hello", tok.Decode([]int{29871, 15043}))
	assert.Equal(t, "Hello", tok.Decode([]int{1, 15043}), "BOS is invisible and does not count as first")
	assert.Equal(t, "Hello Hello", tok.Decode([]int{15043, 15043, 2}))
	assert.Equal(t, " \u2047  Hello", tok.Decode([]int{0, 15043}), "unknown prints SentencePiece's unk surface and counts as the first piece")
	assert.Equal(t, "", tok.Decode([]int{-1, 32000}), "out-of-range ids print nothing")
	// "▁" in the input is SentencePiece's own space symbol, so it decodes as a space.
	assert.Equal(t, "a b", tok.Decode(tok.Encode("a\u2581b", false)))
}
