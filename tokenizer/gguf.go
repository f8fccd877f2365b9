package tokenizer

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/pinfer/pinfer/gguf"
)

// FromGGUF builds the tokenizer stored in a GGUF file's tokenizer.ggml.*
// metadata: SentencePiece ("llama") or byte-level BPE ("gpt2").
func FromGGUF(f *gguf.File) (*Tokenizer, error) {
	const modelKey = "tokenizer.ggml.model"
	model, err := f.String(modelKey)
	if err != nil {
		return nil, err
	}
	if model != "llama" && model != "gpt2" {
		return nil, fmt.Errorf("%s: metadata key %q: tokenizer model %q is not supported, want \"llama\" or \"gpt2\"", f.Path, modelKey, model)
	}
	v := Vocab{Model: model}
	if v.Tokens, err = f.Strings("tokenizer.ggml.tokens"); err != nil {
		return nil, err
	}
	// Scores and types may be left out, as llama.cpp allows: every score
	// 0 and every token normal.
	v.Scores, v.Types = make([]float32, len(v.Tokens)), make([]int32, len(v.Tokens))
	for i := range v.Types {
		v.Types[i] = Normal
	}
	if f.Has("tokenizer.ggml.scores") {
		if v.Scores, err = f.Float32s("tokenizer.ggml.scores"); err != nil {
			return nil, err
		}
	}
	if f.Has("tokenizer.ggml.token_type") {
		if v.Types, err = f.Int32s("tokenizer.ggml.token_type"); err != nil {
			return nil, err
		}
	}
	bos, eos, unk := 1, 2, 0
	if model == "gpt2" {
		if bos, eos, unk, err = readBPE(f, &v); err != nil {
			return nil, err
		}
	}
	for _, x := range []struct {
		key string
		dst *int
		def int
	}{
		{"tokenizer.ggml.bos_token_id", &v.BOS, bos},
		{"tokenizer.ggml.eos_token_id", &v.EOS, eos},
		{"tokenizer.ggml.unknown_token_id", &v.UNK, unk},
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
		def bool
	}{
		{"tokenizer.ggml.add_space_prefix", &v.AddSpacePrefix, model == "llama"},
		{"tokenizer.ggml.add_bos_token", &v.AddBOS, model == "llama" || bpeAddsBOS(v.Pre)},
	} {
		*x.dst = x.def
		if f.Has(x.key) {
			if *x.dst, err = f.Bool(x.key); err != nil {
				return nil, err
			}
		}
	}
	if v.EndOfTurn, err = endOfTurn(f, v); err != nil {
		return nil, err
	}
	v.RStrip = rstrip(f, v)
	t, err := New(v)
	if err != nil {
		return nil, fmt.Errorf("%s: tokenizer.ggml.*: %w", f.Path, err)
	}
	return t, nil
}

// turnEnds are the texts of the control tokens that chat models end a turn
// with (Phi-3, ChatML, Gemma, Llama 3, ...): llama.cpp stops at them too,
// files seldom saying so in their metadata.
var turnEnds = map[string]bool{"<|end|>": true, "<|im_end|>": true, "<end_of_turn>": true,
	"<|eot_id|>": true, "<|eom_id|>": true, "<|endoftext|>": true, "<EOT>": true}

// endOfTurn lists the ids besides EOS that end a text: the end-of-turn
// and end-of-message ids the metadata names, and control or user-defined
// tokens with an end-of-turn text.
func endOfTurn(f *gguf.File, v Vocab) ([]int, error) {
	var ids []int
	for _, key := range []string{"tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"} {
		if !f.Has(key) {
			continue
		}
		u, err := f.Uint(key)
		switch {
		case err != nil:
			return nil, err
		case u == math.MaxUint32:
		case u >= uint64(len(v.Tokens)):
			return nil, fmt.Errorf("%s: metadata key %q: token id %d out of range [0,%d)", f.Path, key, u, len(v.Tokens))
		default:
			ids = append(ids, int(u))
		}
	}
	for id, tok := range v.Tokens {
		if turnEnds[tok] && (v.Types[id] == Control || v.Types[id] == UserDefined) && id != v.EOS && !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// rstrip lists the special tokens after which llama.cpp drops whitespace
// when it parses special tokens in a text. No metadata says so: llama.cpp
// marks them by the model's name, for Phi-3 every control, unknown and
// user-defined token but <unk>, <s> and <|endoftext|>, so that a chat
// template's "<|user|>\n" is followed by the message's first word.
func rstrip(f *gguf.File, v Vocab) []int {
	name, _ := f.String("general.name")
	name = strings.ToLower(name)
	if !strings.Contains(name, "phi-3") && !strings.Contains(name, "phi3") {
		return nil
	}
	var ids []int
	for id, tok := range v.Tokens {
		switch v.Types[id] {
		case Control, Unknown, UserDefined:
			if tok != "<unk>" && tok != "<s>" && tok != "<|endoftext|>" {
				ids = append(ids, id)
			}
		}
	}
	return ids
}
