// Package tokenizer implements SentencePiece BPE with byte fallback (GGUF's
// "llama" tokenizer model), producing the same ids as SentencePiece and
// llama.cpp's SPM tokenizer, and reads SentencePiece's tokenizer.model; and
// byte-level BPE (GGUF's "gpt2": GPT-2, Falcon, Llama 3), as llama.cpp's
// BPE tokenizer (bpe.go, pretok.go).
package tokenizer

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Token types as SentencePiece / GGUF number them.
const (
	Normal      = 1
	Unknown     = 2
	Control     = 3
	UserDefined = 4
	Unused      = 5
	Byte        = 6
)

// space is SentencePiece's escaped whitespace, U+2581.
const space = "\u2581"

// unkSurface is what SentencePiece prints for an unknown token.
const unkSurface = " \u2047 "

// Vocab is a SentencePiece vocabulary: parallel Tokens, Scores and Types;
// or, when Model is "gpt2", a byte-level BPE one with its Merges.
// BOS and EOS may be -1 when the model has none (and UNK too for "gpt2").
type Vocab struct {
	Tokens         []string
	Scores         []float32
	Types          []int32
	BOS, EOS, UNK  int
	AddSpacePrefix bool
	AddBOS         bool
	// EndOfTurn: ids besides EOS that end a generated text (a chat model's
	// end of turn, such as Phi-3's <|end|>), as llama.cpp's end-of-generation set.
	EndOfTurn []int
	// RStrip: ids of special tokens after which EncodeSpecial drops the
	// whitespace that follows in the text (llama.cpp's rstrip attribute,
	// which it gives Phi-3's special tokens by the model's name).
	RStrip []int
	// Model is GGUF's tokenizer.ggml.model: "llama" (SentencePiece; also
	// when empty) or "gpt2" (byte-level BPE, which ignores AddSpacePrefix
	// and Scores).
	Model string
	// Merges: "gpt2" only, the BPE merges in rank order, "left right".
	Merges []string
	// Pre: "gpt2" only, tokenizer.ggml.pre, the pre-tokenizer ("default"
	// when empty, "gpt-2", "falcon", "llama-bpe").
	Pre string
}

// Tokenizer encodes and decodes with one Vocab. It is safe for concurrent use.
type Tokenizer struct {
	v Vocab
	// pieces maps the text of every token that encoding may produce
	// (normal and user-defined) to its id.
	pieces map[string]int
	// userDefined holds user-defined pieces by first byte, longest first:
	// SentencePiece matches them whole before merging and never merges them.
	userDefined [256][]string
	byteTok     [256]int // -1 where the vocabulary has no <0xNN> token
	hasBytes    bool
	surface     []string // decoded text of each id (bytes for byte tokens)
	// specials: the control, unknown and user-defined ids whose text
	// EncodeSpecial matches, longest text first; rstrip marks v.RStrip.
	specials []int
	rstrip   map[int]bool
	bpe      *bpeState // byte-level BPE; nil for SentencePiece
}

// New validates v and builds a Tokenizer; v's slices are copied.
func New(v Vocab) (*Tokenizer, error) {
	n := len(v.Tokens)
	if n == 0 {
		return nil, errors.New("tokenizer: empty vocabulary")
	}
	if len(v.Scores) != n || len(v.Types) != n {
		return nil, fmt.Errorf("tokenizer: %d tokens but %d scores and %d types", n, len(v.Scores), len(v.Types))
	}
	bpe := v.Model == "gpt2"
	if v.Model != "" && v.Model != "llama" && !bpe {
		return nil, fmt.Errorf("tokenizer: model %q is not supported, want \"llama\" or \"gpt2\"", v.Model)
	}
	if v.UNK < 0 && !(bpe && v.UNK == -1) || v.UNK >= n {
		return nil, fmt.Errorf("tokenizer: unknown token id %d out of range [0,%d)", v.UNK, n)
	}
	for _, id := range v.EndOfTurn {
		if id < 0 || id >= n {
			return nil, fmt.Errorf("tokenizer: end-of-turn token id %d out of range [0,%d)", id, n)
		}
	}
	for _, id := range v.RStrip {
		if id < 0 || id >= n {
			return nil, fmt.Errorf("tokenizer: rstrip token id %d out of range [0,%d)", id, n)
		}
	}
	for _, x := range []struct {
		name string
		id   int
	}{{"bos", v.BOS}, {"eos", v.EOS}} {
		if x.id < -1 || x.id >= n {
			return nil, fmt.Errorf("tokenizer: %s token id %d out of range [-1,%d)", x.name, x.id, n)
		}
	}
	v.Tokens = append([]string(nil), v.Tokens...)
	v.Scores = append([]float32(nil), v.Scores...)
	v.Types = append([]int32(nil), v.Types...)
	v.EndOfTurn = append([]int(nil), v.EndOfTurn...)
	v.RStrip = append([]int(nil), v.RStrip...)
	v.Merges = append([]string(nil), v.Merges...)

	t := &Tokenizer{v: v, pieces: make(map[string]int, n), surface: make([]string, n)}
	for i := range t.byteTok {
		t.byteTok[i] = -1
	}
	for id, tok := range v.Tokens {
		switch v.Types[id] {
		case Normal, UserDefined:
			if tok == "" {
				return nil, fmt.Errorf("tokenizer: token %d is empty", id)
			}
			// SentencePiece rejects duplicate pieces; keeping the first
			// makes the choice deterministic for sloppy conversions.
			if _, dup := t.pieces[tok]; !dup {
				t.pieces[tok] = id
			}
			if v.Types[id] == UserDefined {
				t.userDefined[tok[0]] = append(t.userDefined[tok[0]], tok)
			}
			t.surface[id] = strings.ReplaceAll(tok, space, " ")
		case Unused:
			t.surface[id] = strings.ReplaceAll(tok, space, " ")
		case Control:
		case Unknown:
			t.surface[id] = unkSurface
		case Byte:
			b, ok := parseByteToken(tok)
			if !ok {
				return nil, fmt.Errorf("tokenizer: byte token %d is %q, want <0xNN>", id, tok)
			}
			if t.byteTok[b] < 0 {
				t.byteTok[b] = id
			}
			t.hasBytes = true
			t.surface[id] = string([]byte{b})
		default:
			return nil, fmt.Errorf("tokenizer: token %d (%q) has unknown type %d", id, tok, v.Types[id])
		}
	}
	for i := range t.userDefined {
		u := t.userDefined[i]
		sort.SliceStable(u, func(a, b int) bool { return len(u[a]) > len(u[b]) })
	}
	for id, typ := range v.Types {
		if (typ == Control || typ == Unknown || typ == UserDefined) && v.Tokens[id] != "" {
			t.specials = append(t.specials, id)
		}
	}
	sort.SliceStable(t.specials, func(a, b int) bool { return len(v.Tokens[t.specials[a]]) > len(v.Tokens[t.specials[b]]) })
	t.rstrip = make(map[int]bool, len(v.RStrip))
	for _, id := range v.RStrip {
		t.rstrip[id] = true
	}
	if bpe {
		if err := t.initBPE(); err != nil {
			return nil, fmt.Errorf("tokenizer: %w", err)
		}
	}
	return t, nil
}

func parseByteToken(s string) (byte, bool) {
	if len(s) != 6 || s[:3] != "<0x" || s[5] != '>' {
		return 0, false
	}
	hi, ok1 := hexVal(s[3])
	lo, ok2 := hexVal(s[4])
	return hi<<4 | lo, ok1 && ok2
}

func hexVal(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// BOS returns the beginning-of-sequence id, or -1.
func (t *Tokenizer) BOS() int { return t.v.BOS }

// EOS returns the end-of-sequence id, or -1.
func (t *Tokenizer) EOS() int { return t.v.EOS }

// EndsText says whether generating id ends the text: EOS, or an end of turn.
func (t *Tokenizer) EndsText(id int) bool {
	return id == t.v.EOS && id >= 0 || slices.Contains(t.v.EndOfTurn, id)
}

// Piece is id's text as llama.cpp's token-to-piece shows it (with
// special tokens rendered, as llama-tokenize prints them): a normal token
// with ▁ as a space (kept at the start), a byte token's byte, a control,
// unknown or user-defined token's text as it is, and nothing for an
// unused one.
func (t *Tokenizer) Piece(id int) string {
	if id < 0 || id >= len(t.surface) {
		return ""
	}
	switch t.v.Types[id] {
	case Control, Unknown, UserDefined:
		return t.v.Tokens[id]
	case Unused:
		return ""
	}
	return t.surface[id]
}

// IsControl says whether id is a control token (BOS, EOS, a chat
// template's markers), which Decode leaves out and Piece names.
func (t *Tokenizer) IsControl(id int) bool {
	return id >= 0 && id < len(t.v.Types) && t.v.Types[id] == Control
}

// Size returns the number of tokens.
func (t *Tokenizer) Size() int { return len(t.v.Tokens) }

// Vocab returns a copy of the vocabulary.
func (t *Tokenizer) Vocab() Vocab {
	v := t.v
	v.Tokens = append([]string(nil), v.Tokens...)
	v.Scores = append([]float32(nil), v.Scores...)
	v.Types = append([]int32(nil), v.Types...)
	v.EndOfTurn = append([]int(nil), v.EndOfTurn...)
	v.RStrip = append([]int(nil), v.RStrip...)
	v.Merges = append([]string(nil), v.Merges...)
	return v
}
