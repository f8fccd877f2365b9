package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/pinfer/pinfer/gguf"
	"github.com/stretchr/testify/require"
)

// tokenize reads a byte-level BPE ("gpt2") vocabulary too, as Falcon's
// files carry: a vocab-only file of <|endoftext|>, the 256 byte tokens
// (GPT-2's bytes_to_unicode texts) and merges for "Hello" and " world".
func TestTokenizeGPT2VocabOnly(t *testing.T) {
	tokens := []string{"<|endoftext|>"}
	types := []int32{3} // control
	n := 0
	for b := range 256 {
		r := rune(b)
		if !('!' <= b && b <= '~' || 0xA1 <= b && b <= 0xAC || 0xAE <= b && b <= 0xFF) {
			r = rune(256 + n)
			n++
		}
		tokens = append(tokens, string(r))
		types = append(types, 1)
	}
	merges := []string{"H e", "l l", "He ll", "Hell o", "Ġ w", "o r", "Ġw or", "l d", "Ġwor ld"}
	for _, m := range merges {
		tokens = append(tokens, strings.ReplaceAll(m, " ", ""))
		types = append(types, 1)
	}
	w := gguf.NewWriter()
	for _, kv := range []struct {
		k string
		v any
	}{
		{"general.architecture", "falcon"},
		{"tokenizer.ggml.model", "gpt2"},
		{"tokenizer.ggml.pre", "falcon"},
		{"tokenizer.ggml.tokens", tokens},
		{"tokenizer.ggml.token_type", types},
		{"tokenizer.ggml.merges", merges},
		{"tokenizer.ggml.bos_token_id", uint32(0)},
		{"tokenizer.ggml.eos_token_id", uint32(0)},
	} {
		require.NoError(t, w.Set(kv.k, kv.v))
	}
	path := filepath.Join(t.TempDir(), "ggml-vocab-tiny-bpe.gguf")
	require.NoError(t, w.WriteFile(path, nil))

	// No BOS: llama.cpp adds none for a gpt2 vocabulary by default.
	out, stderr, code := pinfer(t, "tokenize", "-m", path, "-p", "<|endoftext|>Hello world")
	require.Zero(t, code, stderr)
	require.Equal(t, "     0 -> \"<|endoftext|>\"\n   260 -> \"Hello\"\n   265 -> \" world\"\n", out)
	out, stderr, code = pinfer(t, "tokenize", "-m", path, "-p", "Hello world!", "--ids")
	require.Zero(t, code, stderr)
	require.Equal(t, "[260, 265, 34]\n", out)
}
