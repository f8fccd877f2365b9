package tokenizer

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/pinfer/pinfer/gguf"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"
)

// writeGGUF writes a tensorless GGUF v3 file with string-valued keys.
func writeGGUF(t *testing.T, kv [][2]string) string {
	t.Helper()
	b := []byte("GGUF")
	b = binary.LittleEndian.AppendUint32(b, 3)
	b = binary.LittleEndian.AppendUint64(b, 0)
	b = binary.LittleEndian.AppendUint64(b, uint64(len(kv)))
	str := func(s string) {
		b = binary.LittleEndian.AppendUint64(b, uint64(len(s)))
		b = append(b, s...)
	}
	for _, p := range kv {
		str(p[0])
		b = binary.LittleEndian.AppendUint32(b, 8) // string
		str(p[1])
	}
	path := filepath.Join(t.TempDir(), "x.gguf")
	require.NoError(t, os.WriteFile(path, b, 0o644))
	return path
}

func TestFromGGUFErrors(t *testing.T) {
	for _, tc := range []struct {
		kv   [][2]string
		want string
	}{
		{[][2]string{{"tokenizer.ggml.model", "bert"}}, `"tokenizer.ggml.model": tokenizer model "bert" is not supported, want "llama" or "gpt2"`},
		{[][2]string{{"tokenizer.ggml.model", "gpt2"}}, `"tokenizer.ggml.tokens"`},
		{[][2]string{{"general.name", "x"}}, `"tokenizer.ggml.model"`},
		{[][2]string{{"tokenizer.ggml.model", "llama"}}, `"tokenizer.ggml.tokens"`},
	} {
		path := writeGGUF(t, tc.kv)
		f, err := gguf.Open(path)
		require.NoError(t, err)
		_, err = FromGGUF(f)
		f.Close()
		require.Error(t, err)
		assert.Contains(t, err.Error(), path)
		assert.Contains(t, err.Error(), tc.want)
	}
}

func TestNewErrors(t *testing.T) {
	ok := Vocab{Tokens: []string{"<unk>", "a"}, Scores: []float32{0, 0}, Types: []int32{Unknown, Normal}, BOS: -1, EOS: -1}
	_, err := New(ok)
	require.NoError(t, err)
	for name, mut := range map[string]func(v *Vocab){
		"empty":      func(v *Vocab) { v.Tokens, v.Scores, v.Types = nil, nil, nil },
		"lengths":    func(v *Vocab) { v.Scores = v.Scores[:1] },
		"unk":        func(v *Vocab) { v.UNK = 2 },
		"bos":        func(v *Vocab) { v.BOS = 5 },
		"type":       func(v *Vocab) { v.Types = []int32{Unknown, 9} },
		"byte token": func(v *Vocab) { v.Types = []int32{Unknown, Byte} },
		"empty tok":  func(v *Vocab) { v.Tokens = []string{"<unk>", ""} },
	} {
		v := ok
		mut(&v)
		_, err := New(v)
		assert.Error(t, err, name)
	}
}

func TestNoByteFallbackUsesUNK(t *testing.T) {
	v := Vocab{
		Tokens: []string{"<unk>", "\u2581", "a", "\u2581a"},
		Scores: []float32{0, -1, -2, -3},
		Types:  []int32{Unknown, Normal, Normal, Normal},
		BOS:    -1, EOS: -1, AddSpacePrefix: true,
	}
	tok, err := New(v)
	require.NoError(t, err)
	// "▁aé": ▁a merges; é has no token and no bytes to fall back on.
	assert.Equal(t, []int{3, 0}, tok.Encode("aé", true))
}

// pieceMsg encodes one ModelProto.pieces entry.
func pieceMsg(piece string, score float32, typ uint64) []byte {
	var p []byte
	p = protowire.AppendTag(p, 1, protowire.BytesType)
	p = protowire.AppendString(p, piece)
	p = protowire.AppendTag(p, 2, protowire.Fixed32Type)
	p = protowire.AppendFixed32(p, math.Float32bits(score))
	p = protowire.AppendTag(p, 3, protowire.VarintType)
	return protowire.AppendVarint(p, typ)
}

func modelProto(modelType uint64, bosID int64, dummyPrefix bool) []byte {
	var m []byte
	for _, p := range []struct {
		s   string
		typ uint64
	}{{"<unk>", Unknown}, {"<s>", Control}, {"</s>", Control}, {"\u2581", Normal}, {"a", Normal}} {
		m = protowire.AppendTag(m, 1, protowire.BytesType)
		m = protowire.AppendBytes(m, pieceMsg(p.s, -1, p.typ))
	}
	var tr []byte
	tr = protowire.AppendTag(tr, 3, protowire.VarintType)
	tr = protowire.AppendVarint(tr, modelType)
	tr = protowire.AppendTag(tr, 41, protowire.VarintType)
	tr = protowire.AppendVarint(tr, uint64(bosID)) // negative int32s are sign-extended
	m = protowire.AppendTag(m, 2, protowire.BytesType)
	m = protowire.AppendBytes(m, tr)
	var ns []byte
	ns = protowire.AppendTag(ns, 3, protowire.VarintType)
	ns = protowire.AppendVarint(ns, protowire.EncodeBool(dummyPrefix))
	m = protowire.AppendTag(m, 3, protowire.BytesType)
	return protowire.AppendBytes(m, ns)
}

func TestReadModelProtoFields(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.model")
	require.NoError(t, os.WriteFile(path, modelProto(2, -1, false), 0o644))
	v, err := ReadModelProto(path)
	require.NoError(t, err)
	assert.Equal(t, []string{"<unk>", "<s>", "</s>", "\u2581", "a"}, v.Tokens)
	assert.Equal(t, []int32{Unknown, Control, Control, Normal, Normal}, v.Types)
	assert.Equal(t, []float32{-1, -1, -1, -1, -1}, v.Scores)
	assert.Equal(t, -1, v.BOS)
	assert.Equal(t, 2, v.EOS)
	assert.False(t, v.AddSpacePrefix)
	assert.False(t, v.AddBOS)

	bad := map[string][]byte{
		"trainer_spec.model_type": modelProto(1, 1, true),
		"trainer_spec.bos_id":     modelProto(2, 7, true),
		"pieces: unexpected EOF":  append(protowire.AppendTag(nil, 1, protowire.BytesType), 5, 0x0a),
		"tag":                     {0xff},
		"pieces[0]: type":         protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), pieceMsg("x", 0, 9)),
		"piece: missing":          protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), nil),
		"pieces[5].piece: empty":  append(modelProto(2, 1, true), protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), pieceMsg("", 0, Normal))...),
	}
	for field, data := range bad {
		require.NoError(t, os.WriteFile(path, data, 0o644))
		_, err := ReadModelProto(path)
		require.Error(t, err, field)
		assert.Contains(t, err.Error(), path, field)
		assert.Contains(t, err.Error(), field)
	}
	_, err = ReadModelProto(filepath.Join(dir, "missing.model"))
	assert.Error(t, err)
}
