package tokenizer

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/pinfer/pinfer/gguf"
)

// Byte-level BPE: GGUF's "gpt2" tokenizer model (GPT-2, Falcon, Llama 3,
// ...), as llama.cpp's BPE tokenizer works. A token's text is its bytes,
// each written as one code point by GPT-2's bytes_to_unicode map (printable
// bytes as themselves, the others as U+0100 onwards, so that the space is
// "Ġ"); the merges, "left right" in rank order, say which adjacent pieces
// join, the lowest rank first.

// byteChars[b] is byte b's code point in token texts, as UTF-8.
var byteChars [256]string

// charBytes maps those code points back to their bytes.
var charBytes = map[rune]byte{}

// numericByte[b]: byte b's code point is a number (category N): the ASCII
// digits, and 0xB2 "²", 0xB3 "³", 0xB9 "¹", 0xBC-0xBE "¼½¾".
var numericByte [256]bool

func init() {
	n := 0
	for b := range 256 {
		r := rune(b)
		if !('!' <= b && b <= '~' || 0xA1 <= b && b <= 0xAC || 0xAE <= b && b <= 0xFF) {
			r = rune(256 + n)
			n++
		}
		byteChars[b] = string(r)
		charBytes[r] = byte(b)
		numericByte[b] = unicode.IsNumber(r)
	}
}

// bpeState is what a byte-level BPE tokenizer adds to a Tokenizer.
type bpeState struct {
	pre   preTokenizer
	ranks map[[2]string]int
	ids   map[string]int // every token's text, the last id for a repeated one, as llama.cpp's token_to_id
	user  []int          // user-defined ids, longest text first: split out even by Encode, as llama.cpp does
}

// initBPE sets t up for byte-level BPE: the merges' ranks, the pre-tokenizer
// and each token's decoded text.
func (t *Tokenizer) initBPE() error {
	pre, err := lookupPre(t.v.Pre)
	if err != nil {
		return err
	}
	b := &bpeState{pre: pre, ranks: make(map[[2]string]int, len(t.v.Merges)), ids: make(map[string]int, len(t.v.Tokens))}
	for rank, m := range t.v.Merges {
		// llama.cpp splits at the first space after the first byte.
		k := strings.IndexByte(m[min(1, len(m)):], ' ')
		if k < 0 {
			return fmt.Errorf("merge %d (%q) is not two pieces separated by a space", rank, m)
		}
		k += min(1, len(m))
		pair := [2]string{m[:k], m[k+1:]}
		if _, dup := b.ranks[pair]; !dup {
			b.ranks[pair] = rank
		}
	}
	for id, tok := range t.v.Tokens {
		if tok != "" {
			b.ids[tok] = id
		}
		switch t.v.Types[id] {
		case Normal:
			t.surface[id] = decodeByteLevel(tok)
		case UserDefined:
			t.surface[id] = tok
		case Unknown, Unused:
			// llama.cpp prints neither (Piece shows an unknown token's text).
			t.surface[id] = ""
		}
	}
	for _, id := range t.specials {
		if t.v.Types[id] == UserDefined {
			b.user = append(b.user, id)
		}
	}
	t.bpe = b
	return nil
}

// decodeByteLevel maps a token's text back to its bytes. A code point outside
// the byte map (in a vocabulary that is not byte-level throughout) is kept
// as it is.
func decodeByteLevel(s string) string {
	out := make([]byte, 0, len(s))
	for _, r := range s {
		if b, ok := charBytes[r]; ok {
			out = append(out, b)
		} else {
			out = utf8.AppendRune(out, r)
		}
	}
	return string(out)
}

// encodeBPEText is Encode for byte-level BPE: user-defined tokens are
// matched whole first (llama.cpp does so even without parse_special), then
// every stretch between them is encoded.
func (t *Tokenizer) encodeBPEText(out []int, text string) []int {
	if len(t.bpe.user) == 0 {
		return t.encodeBPE(out, text)
	}
	for _, f := range t.partition(text, t.bpe.user) {
		if f.id >= 0 {
			out = append(out, f.id)
		} else {
			out = t.encodeBPE(out, text[f.start:f.end])
		}
	}
	return out
}

// encodeBPE appends the ids of text: its words, each merged on its own.
func (t *Tokenizer) encodeBPE(out []int, text string) []int {
	var w []byte
	var syms []symbol
	for _, word := range t.bpe.pre.split(text) {
		w = w[:0]
		for i := 0; i < len(word); i++ {
			w = append(w, byteChars[word[i]]...)
		}
		if t.bpe.pre.ignoreMerges {
			if id, ok := t.bpe.ids[string(w)]; ok {
				out = append(out, id)
				continue
			}
		}
		out, syms = t.mergeWord(out, string(w), syms[:0])
	}
	return out
}

// mergeWord merges the characters of one byte-encoded word by rank, lowest
// first and leftmost among equals (llama.cpp's queue), and appends the
// pieces' ids. A piece that is no token becomes the tokens of its single
// bytes, where a byte's text is one (ASCII), as in llama.cpp.
func (t *Tokenizer) mergeWord(out []int, s string, syms []symbol) ([]int, []symbol) {
	for i := 0; i < len(s); {
		_, n := utf8.DecodeRuneInString(s[i:])
		syms = append(syms, symbol{start: i, end: i + n, prev: len(syms) - 1, next: len(syms) + 1})
		i += n
	}
	if len(syms) == 0 {
		return out, syms
	}
	syms[len(syms)-1].next = -1
	merge(s, syms, func(l, r symbol) (float32, bool) {
		rank, ok := t.bpe.ranks[[2]string{s[l.start:l.end], s[r.start:r.end]}]
		// Ranks are exact in a float32 up to 2^24 merges.
		return -float32(rank), ok
	})
	for i := 0; i >= 0; i = syms[i].next {
		piece := s[syms[i].start:syms[i].end]
		if id, ok := t.bpe.ids[piece]; ok {
			out = append(out, id)
			continue
		}
		for j := 0; j < len(piece); j++ {
			if id, ok := t.bpe.ids[piece[j:j+1]]; ok {
				out = append(out, id)
			}
		}
	}
	return out, syms
}

// readBPE reads a "gpt2" vocabulary's merges and pre-tokenizer into v and
// returns llama.cpp's default BOS, EOS and UNK ids for it: 11, 11 (Falcon's
// <|endoftext|>, where the vocabulary has an id 11) and none.
func readBPE(f *gguf.File, v *Vocab) (bos, eos, unk int, err error) {
	if v.Merges, err = f.Strings("tokenizer.ggml.merges"); err != nil {
		return 0, 0, 0, err
	}
	const preKey = "tokenizer.ggml.pre"
	if f.Has(preKey) {
		if v.Pre, err = f.String(preKey); err != nil {
			return 0, 0, 0, err
		}
	}
	if _, err := lookupPre(v.Pre); err != nil {
		return 0, 0, 0, fmt.Errorf("%s: metadata key %q: %w", f.Path, preKey, err)
	}
	bos = -1
	if len(v.Tokens) > 11 {
		bos = 11
	}
	return bos, bos, -1, nil
}

// bpeAddsBOS is llama.cpp's default for tokenizer.ggml.add_bos_token in a
// "gpt2" vocabulary: false but for Llama 3's pre-tokenizer.
func bpeAddsBOS(pre string) bool {
	p, err := lookupPre(pre)
	return err == nil && p.addBOS
}
