package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/pinfer/pinfer/internal/fixtures"
	"github.com/stretchr/testify/require"
)

// llama-tokenize parses special tokens unless --no-parse-special is given:
// Phi-3's chat turn is these 8 ids there (its rstrip drops each "\n" after a
// special token). pinfer spelled <|user|> out as text, 24 ids.
func TestTokenizeParsesSpecialReview(t *testing.T) {
	phi := fixtures.Path(t, "vocab-phi-3", "ggml-vocab-phi-3.gguf")
	turn := "<|user|>\nSYS\nHI<|end|>\n<|assistant|>\n"
	out, stderr, code := pinfer(t, "tokenize", "-m", phi, "-p", turn, "--json")
	require.Zero(t, code, stderr)
	require.Equal(t, "[1,32010,317,21554,13,17628,32007,32001]\n", out)

	// --no-parse-special: the text of <|end|> is plain text (what run encodes).
	out, stderr, code = pinfer(t, "tokenize", "-m", phi, "-p", "<|end|>", "--json", "--no-parse-special")
	require.Zero(t, code, stderr)
	require.NotContains(t, out, "32007")

	// Special tokens print as their text, <unk> included, as llama-tokenize
	// prints them.
	spm := fixtures.Path(t, "vocab-llama-spm", "ggml-vocab-llama-spm.gguf")
	out, stderr, code = pinfer(t, "tokenize", "-m", spm, "-p", "<unk>Hello</s>")
	require.Zero(t, code, stderr)
	require.Equal(t, "     1 -> \"<s>\"\n     0 -> \"<unk>\"\n 15043 -> \" Hello\"\n     2 -> \"</s>\"\n", out)
}

// llama-tokenize's other inputs and outputs: -f FILE, --no-bos, --ids
// ("[1, 2, 3]") and --show-count; a missing prompt is an error, as there
// (it printed a lone BOS), and a missing file is one line naming it.
func TestTokenizeFlagsReview(t *testing.T) {
	spm := fixtures.Path(t, "vocab-llama-spm", "ggml-vocab-llama-spm.gguf")
	// "Hello world" is 15043 3186 in ggml-vocab-llama-spm.gguf.out.
	text := filepath.Join(t.TempDir(), "t.txt")
	require.NoError(t, os.WriteFile(text, []byte("Hello world"), 0o644))
	out, stderr, code := pinfer(t, "tokenize", "-m", spm, "-f", text, "--ids", "--show-count")
	require.Zero(t, code, stderr)
	require.Equal(t, "[1, 15043, 3186]\nTotal number of tokens: 3\n", out)
	out, stderr, code = pinfer(t, "tokenize", "-m", spm, "-p", "Hello world", "--no-bos", "--json")
	require.Zero(t, code, stderr)
	require.Equal(t, "[15043,3186]\n", out)
	out, stderr, code = pinfer(t, "tokenize", "-m", spm, "-p", "", "--json")
	require.Zero(t, code, stderr)
	require.Equal(t, "[1]\n", out)

	refused(t, []string{"tokenize", "-m", spm}, "-p TEXT or -f FILE")
	refused(t, []string{"tokenize", "-m", spm, "-p", "x", "-f", text}, "not both")
	missing := filepath.Join(t.TempDir(), "missing.txt")
	refused(t, []string{"tokenize", "-m", spm, "-f", missing}, missing)
}
