package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func checkVocabCases(t *testing.T, tok *Tokenizer, base string) {
	cases := readVocabTests(t, base)
	require.Len(t, cases, 46)
	for i, c := range cases {
		got := tok.Encode(c.text, false)
		assert.Equal(t, c.ids, got, "case %d %q", i, c.text)
		// No dummy-prefix or whitespace normalization is lossy for these
		// texts: the first piece always starts with the prefix's ▁, and
		// SentencePiece strips exactly that one, so every case round trips.
		assert.Equal(t, c.text, tok.Decode(c.ids), "case %d", i)
		withBOS := tok.Encode(c.text, true)
		assert.Equal(t, append([]int{1}, c.ids...), withBOS, "case %d", i)
		assert.Equal(t, c.text, tok.Decode(withBOS), "case %d with BOS", i)
	}
}

func TestLlamaSPMVocab(t *testing.T) {
	tok := loadGGUF(t, "vocab-llama-spm/ggml-vocab-llama-spm.gguf")
	assert.Equal(t, 32000, tok.Size())
	assert.Equal(t, 1, tok.BOS())
	assert.Equal(t, 2, tok.EOS())
	v := tok.Vocab()
	assert.True(t, v.AddSpacePrefix)
	assert.True(t, v.AddBOS)
	checkVocabCases(t, tok, filepath.Join(modelsDir(t), "vocab-llama-spm/ggml-vocab-llama-spm.gguf"))
}

func TestPhi3Vocab(t *testing.T) {
	tok := loadGGUF(t, "vocab-phi-3/ggml-vocab-phi-3.gguf")
	// Phi-3's GGUF has no add_space_prefix key (so the default, true,
	// applies), gives its control tokens score -1000 and ends in
	// [PAD] tokens typed unknown; its eos is <|endoftext|>.
	assert.Equal(t, 32064, tok.Size())
	assert.Equal(t, 32000, tok.EOS())
	assert.True(t, tok.Vocab().AddSpacePrefix)
	checkVocabCases(t, tok, filepath.Join(modelsDir(t), "vocab-phi-3/ggml-vocab-phi-3.gguf"))

	// </s> is user-defined in Phi-3: SentencePiece matches it whole, while
	// control tokens such as <|user|> are never produced from text.
	assert.Equal(t, []int{29871, 2}, tok.Encode("</s>", false))
	assert.NotContains(t, tok.Encode("<|user|>", false), 32010)
	assert.Equal(t, "<|user|>", tok.Decode(tok.Encode("<|user|>", false)))
	assert.Equal(t, "", tok.Decode([]int{32010}))
}

func TestStories260KLlama2c(t *testing.T) {
	tok := loadGGUF(t, "stories260K/stories260K.gguf")
	data, err := os.ReadFile(filepath.Join(modelsDir(t), "stories260K/tok512_encode_runc.json"))
	require.NoError(t, err)
	var ref struct {
		VocabSize int `json:"vocab_size"`
		BOS       int `json:"bos"`
		Cases     []struct {
			Text string `json:"text"`
			IDs  []int  `json:"ids"`
		} `json:"cases"`
	}
	require.NoError(t, json.Unmarshal(data, &ref))
	require.Equal(t, ref.VocabSize, tok.Size())
	require.Equal(t, ref.BOS, tok.BOS())
	require.NotEmpty(t, ref.Cases)
	// llama2.c merges the same way (best score, leftmost on ties, byte
	// fallback at id byte+3, dummy prefix only for non-empty text), so its
	// vectors match exactly.
	for _, c := range ref.Cases {
		got := tok.Encode(c.Text, true)
		assert.Equal(t, c.IDs, got, "%q", c.Text)
		assert.Equal(t, c.Text, tok.Decode(got), "%q", c.Text)
	}
}

func TestReadModelProto(t *testing.T) {
	dir := filepath.Join(modelsDir(t), "shakespeare-relu-6m")
	v, err := ReadModelProto(filepath.Join(dir, "tokenizer.model"))
	require.NoError(t, err)
	require.Len(t, v.Tokens, 1024)
	assert.Equal(t, 1, v.BOS)
	assert.Equal(t, 2, v.EOS)
	assert.Equal(t, 0, v.UNK)
	for b := 0; b < 256; b++ {
		want := "<0x" + strings.ToUpper(string("0123456789abcdef"[b>>4])+string("0123456789abcdef"[b&15])) + ">"
		i := indexOf(v.Tokens, want)
		require.GreaterOrEqual(t, i, 0, want)
		assert.Equal(t, int32(Byte), v.Types[i], want)
	}
	tok, err := New(v)
	require.NoError(t, err)
	assert.Equal(t, []int{870, 983}, tok.Encode("ROMEO:", false))

	data, err := os.ReadFile(filepath.Join(dir, "reference.json"))
	require.NoError(t, err)
	var ref struct {
		BOS     int `json:"bos_id"`
		Prompts []struct {
			Text string `json:"text"`
			IDs  []int  `json:"ids"`
		} `json:"prompts"`
	}
	require.NoError(t, json.Unmarshal(data, &ref))
	require.Len(t, ref.Prompts, 4)
	for _, p := range ref.Prompts {
		assert.Equal(t, p.IDs, tok.Encode(p.Text, true), "%q", p.Text)
		assert.Equal(t, p.Text, tok.Decode(p.IDs), "%q", p.Text)
	}
}

func indexOf(s []string, x string) int {
	for i, y := range s {
		if y == x {
			return i
		}
	}
	return -1
}
