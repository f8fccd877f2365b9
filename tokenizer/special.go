package tokenizer

import "strings"

// EncodeSpecial tokenizes text as llama.cpp does with parse_special, which
// llama-tokenize and llama-cli use for a prompt: the text of a control,
// unknown or user-defined token (longest first) becomes that token, and the
// text between such tokens is encoded as Encode encodes a text, each stretch
// with its own dummy-prefix space (llama.cpp prefixes text that starts the
// input or follows a special token, and every stretch does one or the
// other). Whitespace right after a token in Vocab.RStrip is dropped. BOS
// leads when addBOS is set and the vocabulary has one, even when the text
// starts with BOS's own text, as in llama.cpp.
func (t *Tokenizer) EncodeSpecial(text string, addBOS bool) []int {
	out := make([]int, 0, len(text)/3+2)
	if addBOS && t.v.BOS >= 0 {
		out = append(out, t.v.BOS)
	}
	for _, f := range t.partition(text, t.specials) {
		if f.id >= 0 {
			out = append(out, f.id)
		} else {
			out = t.encodeInto(out, text[f.start:f.end])
		}
	}
	return out
}

// fragment is a special token (id >= 0) or the text [start, end) (id -1).
type fragment struct {
	id         int
	start, end int
}

// partition splits text at the texts of ids (special tokens, longest
// first), one token at a time, each over the text the ones before left, as
// llama.cpp's tokenizer_st_partition does. Text fragments are never empty.
func (t *Tokenizer) partition(text string, ids []int) []fragment {
	if text == "" {
		return nil
	}
	frags := []fragment{{id: -1, start: 0, end: len(text)}}
	for _, id := range ids {
		tok := t.v.Tokens[id]
		if !strings.Contains(text, tok) {
			continue
		}
		var next []fragment
		for _, f := range frags {
			if f.id >= 0 {
				next = append(next, f)
				continue
			}
			start := f.start
			for start < f.end {
				k := strings.Index(text[start:f.end], tok)
				if k < 0 {
					break
				}
				if k > 0 {
					next = append(next, fragment{id: -1, start: start, end: start + k})
				}
				next = append(next, fragment{id: id})
				start += k + len(tok)
				if t.rstrip[id] {
					for start < f.end && isSpace(text[start]) {
						start++
					}
				}
			}
			if start < f.end {
				next = append(next, fragment{id: -1, start: start, end: f.end})
			}
		}
		frags = next
	}
	return frags
}

// isSpace is C's isspace in the "C" locale, which llama.cpp strips with.
func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}
