package tokenizer

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"
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

// FuzzModelProto: any tokenizer.model either fails with one line that
// starts with its path, or gives a vocabulary that New accepts and that
// encodes and decodes, so a bad file is caught where it is read.
func FuzzModelProto(f *testing.F) {
	real, err := os.ReadFile(filepath.Join(modelsDir(f), "shakespeare-relu-6m", "tokenizer.model"))
	require.NoError(f, err)
	f.Add(real)
	f.Add(real[:len(real)/2])
	f.Add(modelProto(2, 1, true))
	f.Add(modelProto(2, -1, false))
	// An empty normal piece: read without complaint before, then refused by New.
	f.Add(append(modelProto(2, 1, true), protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), pieceMsg("", 0, Normal))...))
	path := filepath.Join(f.TempDir(), "tokenizer.model")
	f.Fuzz(func(t *testing.T, data []byte) {
		require.NoError(t, os.WriteFile(path, data, 0o644))
		v, err := ReadModelProto(path)
		if err != nil {
			msg := err.Error()
			if !strings.HasPrefix(msg, path+": ") || strings.Contains(msg, "\n") {
				t.Fatalf("error is not one line naming the file: %q", msg)
			}
			return
		}
		tok, err := New(v)
		if err != nil {
			t.Fatalf("ReadModelProto accepted a vocabulary that New rejects: %v", err)
		}
		ids := tok.Encode("Hello, wörld 1234 ▁x", true)
		_ = tok.Decode(ids)
	})
}
