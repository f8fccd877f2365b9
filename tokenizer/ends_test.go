package tokenizer

import (
	"path/filepath"
	"testing"

	"github.com/pinfer/pinfer/gguf"

	"github.com/stretchr/testify/require"
)

// Phi-3 ends a chat turn with <|end|> (id 32007), a control token its file
// does not name as EOS (that is <|endoftext|>, 32000): generation must stop
// at both, as llama.cpp's end-of-generation set does, and at nothing else.
func TestEndsTextPhi3(t *testing.T) {
	tok := loadGGUF(t, "vocab-phi-3/ggml-vocab-phi-3.gguf")
	v := tok.Vocab()
	require.Equal(t, "<|end|>", v.Tokens[32007])
	require.Equal(t, "<|endoftext|>", v.Tokens[v.EOS])
	require.True(t, tok.EndsText(32007))
	require.True(t, tok.EndsText(v.EOS))
	ends := 0
	for id := range v.Tokens {
		if tok.EndsText(id) {
			ends++
		}
	}
	require.Equal(t, 2, ends, "<|user|>, <|assistant|> and the rest go on")
	plain := loadGGUF(t, "vocab-llama-spm/ggml-vocab-llama-spm.gguf")
	require.Empty(t, plain.Vocab().EndOfTurn)
	require.True(t, plain.EndsText(2))
	require.False(t, plain.EndsText(1))
}

// Pieces as llama.cpp's tokenize prints them: the word's space kept, a
// control token by name, a byte token as its byte.
func TestPiece(t *testing.T) {
	tok := loadGGUF(t, "vocab-llama-spm/ggml-vocab-llama-spm.gguf")
	require.Equal(t, []int{1, 15043, 3186}, tok.Encode("Hello world", true))
	require.Equal(t, "<s>", tok.Piece(1))
	require.Equal(t, " Hello", tok.Piece(15043))
	require.Equal(t, " world", tok.Piece(3186))
	require.Equal(t, "\n", tok.Piece(13)) // <0x0A>
	require.Equal(t, "", tok.Piece(-1))
}

// A vocabulary without scores or token types loads as llama.cpp loads it:
// scores 0, every token normal (it was refused).
func TestScoresAndTypesOptional(t *testing.T) {
	src, err := gguf.Open(filepath.Join(modelsDir(t), "vocab-llama-spm/ggml-vocab-llama-spm.gguf"))
	require.NoError(t, err)
	defer src.Close()
	w := gguf.NewWriter()
	for _, x := range src.KVs {
		if x.Key != "tokenizer.ggml.scores" && x.Key != "tokenizer.ggml.token_type" {
			require.NoError(t, w.Set(x.Key, x.Value))
		}
	}
	path := filepath.Join(t.TempDir(), "v.gguf")
	require.NoError(t, w.WriteFile(path, nil))
	f, err := gguf.Open(path)
	require.NoError(t, err)
	defer f.Close()
	tok, err := FromGGUF(f)
	require.NoError(t, err)
	v := tok.Vocab()
	require.Len(t, v.Types, 32000)
	for i := range v.Types {
		require.Equal(t, int32(Normal), v.Types[i])
		require.Zero(t, v.Scores[i])
	}
	require.Equal(t, " Hello", tok.Piece(15043))
}
