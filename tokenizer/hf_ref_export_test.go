package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// What hf_ref_test.go (package tokenizer_test, which imports convert, an
// importer of this package) takes from this package's own tests.

// GPT2RefVocab is GPT-2's vocabulary from the byte-level BPE reference
// (testdata/bpe-ref): its tokens by id and its merges by rank.
func GPT2RefVocab(t testing.TB) (tokens, merges []string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "vocab.json")
	bpeRefNode(t, "vocab", out)
	data, err := os.ReadFile(out)
	require.NoError(t, err)
	var ref struct {
		Tokens []string `json:"tokens"`
		Merges []string `json:"merges"`
	}
	require.NoError(t, json.Unmarshal(data, &ref))
	require.Len(t, ref.Tokens, 50257)
	return ref.Tokens, ref.Merges
}

// BPERefTexts are the texts of the byte-level BPE reference test: llama.cpp's
// tokenizer test texts, hand-picked cases and random mixtures.
func BPERefTexts(t testing.TB) []string { return bpeRefTexts(t) }

// ByteLevelWords is the pre-tokenizer pre's words of text, each written
// as its token text would be (a byte a character, "Ġ" the space).
func ByteLevelWords(t testing.TB, pre, text string) []string {
	t.Helper()
	p, err := lookupPre(pre)
	require.NoError(t, err)
	words := p.split(text)
	for i, w := range words {
		var b strings.Builder
		for j := 0; j < len(w); j++ {
			b.WriteString(byteChars[w[j]])
		}
		words[i] = b.String()
	}
	return append([]string{}, words...)
}
