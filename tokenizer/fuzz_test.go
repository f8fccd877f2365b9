package tokenizer

import (
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

func FuzzEncodeDecode(f *testing.F) {
	tok := loadGGUF(f, "vocab-llama-spm/ggml-vocab-llama-spm.gguf")
	for _, c := range readVocabTests(f, filepath.Join(modelsDir(f), "vocab-llama-spm/ggml-vocab-llama-spm.gguf")) {
		f.Add(c.text)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			return
		}
		ids := tok.Encode(s, false)
		// The dummy prefix's ▁ is the one space Decode drops, and U+2581
		// in the input is SentencePiece's escaped space, so it comes back
		// as ' '.
		want := strings.ReplaceAll(s, "\u2581", " ")
		if got := tok.Decode(ids); got != want {
			t.Fatalf("Decode(Encode(%q)) = %q, ids %v", s, got, ids)
		}
		if text, _ := streamAll(tok, ids, true); text != want {
			t.Fatalf("stream of Encode(%q) = %q", s, text)
		}
	})
}

// longText is ~100 KB of mixed text: words, punctuation, long runs without
// merges, multi-byte and byte-fallback characters.
func longText() string {
	var b strings.Builder
	for b.Len() < 100_000 {
		b.WriteString("The quick brown fox jumps over the lazy dog; ÜBER Führer 株式会社 𒎗 ")
		b.WriteString(strings.Repeat("3", 40))
		b.WriteString(strings.Repeat(" ", 17))
		b.WriteString("\n")
	}
	return b.String()
}

// Long texts round-trip; their speed is BenchmarkEncode100KB's business.
func TestEncodeLongText(t *testing.T) {
	tok := loadGGUF(t, "vocab-llama-spm/ggml-vocab-llama-spm.gguf")
	text := longText()
	// A single 100 KB word exercises the merge queue without spaces.
	word := strings.Repeat("abcdefghij", 10_000)
	ids := tok.Encode(text, false)
	ids2 := tok.Encode(word, false)
	require.Equal(t, text, tok.Decode(ids))
	require.Equal(t, word, tok.Decode(ids2))
}

func BenchmarkEncode100KB(b *testing.B) {
	tok := loadGGUF(b, "vocab-llama-spm/ggml-vocab-llama-spm.gguf")
	text := longText()
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		tok.Encode(text, true)
	}
}
