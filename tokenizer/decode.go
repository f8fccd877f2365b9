package tokenizer

import (
	"slices"
	"strings"
	"unicode/utf8"
)

// Decode turns ids back into text the way SentencePiece does: ▁ becomes a
// space, byte tokens become raw bytes, control tokens vanish, unknown ones
// print " ⁇ ", and the first piece (after control tokens) loses the one
// leading space that the dummy prefix added. Ids out of range are skipped.
// In a byte-level BPE vocabulary a normal token is its bytes, a user-defined
// one its text, and control, unknown and unused tokens vanish, as in
// llama.cpp.
func (t *Tokenizer) Decode(ids []int) string {
	var b strings.Builder
	first := true
	for _, id := range ids {
		b.WriteString(t.piece(id, &first))
	}
	return b.String()
}

// piece returns id's text; *first says no visible piece has been decoded
// yet and is cleared once one has.
func (t *Tokenizer) piece(id int, first *bool) string {
	if id < 0 || id >= len(t.surface) {
		return ""
	}
	typ := t.v.Types[id]
	if typ == Control {
		return ""
	}
	s := t.surface[id]
	if *first {
		*first = false
		if t.bpe == nil && t.v.AddSpacePrefix && (typ == Normal || typ == UserDefined || typ == Unused) &&
			strings.HasPrefix(t.v.Tokens[id], space) {
			s = s[1:]
		}
	}
	return s
}

// Stream decodes tokens one at a time for printing as they are generated,
// holding back the bytes of a UTF-8 character that byte tokens have not
// completed yet.
type Stream struct {
	t     *Tokenizer
	first bool
	buf   []byte
}

// NewStream starts a stream. first says the next token begins the text, so
// its dummy-prefix space is dropped as in Decode; pass false when the
// tokens continue a prompt.
func (t *Tokenizer) NewStream(first bool) *Stream {
	return &Stream{t: t, first: first}
}

// Add appends a token and returns the text that is complete now.
func (s *Stream) Add(id int) string {
	s.buf = append(s.buf, s.t.piece(id, &s.first)...)
	n := completePrefix(s.buf)
	out := string(s.buf[:n])
	s.buf = append(s.buf[:0], s.buf[n:]...)
	return out
}

// Flush returns whatever is held back, complete or not, and empties the
// stream's buffer.
func (s *Stream) Flush() string {
	out := string(s.buf)
	s.buf = s.buf[:0]
	return out
}

// completePrefix returns the length of b without a trailing partial UTF-8
// sequence that more bytes could still complete. Bytes that can never become
// valid are released as they are, as Decode prints them.
func completePrefix(b []byte) int {
	// A sequence is at most 4 bytes, so a pending lead byte is among the last 3.
	for back := 1; back <= 3 && back <= len(b); back++ {
		c := b[len(b)-back]
		if c < 0x80 {
			return len(b)
		}
		if c < 0xC0 {
			continue
		}
		// FullRune also reports true for a tail that is already invalid.
		if utf8.FullRune(b[len(b)-back:]) {
			return len(b)
		}
		return len(b) - back
	}
	return len(b)
}

// Texts is each token's text as generation writes it (a SentencePiece
// token's ▁ a space, a byte token its byte, a user-defined token its
// text), nil for the tokens that write none: control, unknown and unused
// ones. A grammar's matcher reads the vocabulary so.
func (t *Tokenizer) Texts() [][]byte {
	out := make([][]byte, len(t.surface))
	for id, s := range t.surface {
		switch t.v.Types[id] {
		case Normal, UserDefined, Byte:
			out[id] = []byte(s)
		}
	}
	return out
}

// Ends is the ids that end a text: EOS and the ends of turn.
func (t *Tokenizer) Ends() []int {
	var out []int
	if t.v.EOS >= 0 {
		out = append(out, t.v.EOS)
	}
	for _, id := range t.v.EndOfTurn {
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}
