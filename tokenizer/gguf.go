package tokenizer

import (
	"fmt"
	"math"

	"github.com/pinfer/pinfer/gguf"
)

// FromGGUF builds the tokenizer stored in a GGUF file's tokenizer.ggml.*
// metadata. Only the SentencePiece model ("llama") is supported.
func FromGGUF(f *gguf.File) (*Tokenizer, error) {
	const modelKey = "tokenizer.ggml.model"
	model, err := f.String(modelKey)
	if err != nil {
		return nil, err
	}
	if model != "llama" {
		return nil, fmt.Errorf("%s: metadata key %q: tokenizer model %q is not supported, want \"llama\"", f.Path, modelKey, model)
	}
	var v Vocab
	if v.Tokens, err = f.Strings("tokenizer.ggml.tokens"); err != nil {
		return nil, err
	}
	if v.Scores, err = f.Float32s("tokenizer.ggml.scores"); err != nil {
		return nil, err
	}
	if v.Types, err = f.Int32s("tokenizer.ggml.token_type"); err != nil {
		return nil, err
	}
	for _, x := range []struct {
		key string
		dst *int
		def int
	}{
		{"tokenizer.ggml.bos_token_id", &v.BOS, 1},
		{"tokenizer.ggml.eos_token_id", &v.EOS, 2},
		{"tokenizer.ggml.unknown_token_id", &v.UNK, 0},
	} {
		*x.dst = x.def
		if !f.Has(x.key) {
			continue
		}
		u, err := f.Uint(x.key)
		if err != nil {
			return nil, err
		}
		switch {
		case u == math.MaxUint32: // llama.cpp's spelling of "no such token"
			*x.dst = -1
		case u >= uint64(len(v.Tokens)):
			return nil, fmt.Errorf("%s: metadata key %q: token id %d out of range [0,%d)", f.Path, x.key, u, len(v.Tokens))
		default:
			*x.dst = int(u)
		}
	}
	for _, x := range []struct {
		key string
		dst *bool
	}{
		{"tokenizer.ggml.add_space_prefix", &v.AddSpacePrefix},
		{"tokenizer.ggml.add_bos_token", &v.AddBOS},
	} {
		*x.dst = true
		if f.Has(x.key) {
			if *x.dst, err = f.Bool(x.key); err != nil {
				return nil, err
			}
		}
	}
	t, err := New(v)
	if err != nil {
		return nil, fmt.Errorf("%s: tokenizer.ggml.*: %w", f.Path, err)
	}
	return t, nil
}
