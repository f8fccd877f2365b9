package tokenizer

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/pinfer/pinfer/internal/fixtures"

	"github.com/pinfer/pinfer/gguf"
	"github.com/stretchr/testify/require"
)

// modelsDir is shared/models beside the checkout (a missing one fails the test).
func modelsDir(t testing.TB) string { return fixtures.Dir(t) }

func loadGGUF(t testing.TB, rel string) *Tokenizer {
	t.Helper()
	f, err := gguf.Open(filepath.Join(modelsDir(t), rel))
	require.NoError(t, err)
	defer f.Close()
	tok, err := FromGGUF(f)
	require.NoError(t, err)
	return tok
}

type vocabCase struct {
	text string
	ids  []int
}

// readVocabTests reads llama.cpp's tokenizer test files. Every text in .inp
// is followed by "\n__ggml_vocab_test__\n", so a text's own trailing
// newlines are the ones before that separator's leading "\n".
func readVocabTests(t testing.TB, base string) []vocabCase {
	t.Helper()
	inp, err := os.ReadFile(base + ".inp")
	require.NoError(t, err)
	out, err := os.ReadFile(base + ".out")
	require.NoError(t, err)
	const sep = "\n__ggml_vocab_test__\n"
	require.True(t, strings.HasSuffix(string(inp), sep), "inp must end with the separator")
	texts := strings.Split(strings.TrimSuffix(string(inp), sep), sep)
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	require.Equal(t, len(texts), len(lines))
	cases := make([]vocabCase, len(texts))
	for i, text := range texts {
		ids := []int{}
		for _, f := range strings.Fields(lines[i]) {
			id, err := strconv.Atoi(f)
			require.NoError(t, err)
			ids = append(ids, id)
		}
		cases[i] = vocabCase{text, ids}
	}
	return cases
}
