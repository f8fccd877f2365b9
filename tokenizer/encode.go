package tokenizer

import (
	"strings"
	"unicode/utf8"
)

// symbol is a byte range of the escaped text; merged-away symbols have
// start == end. prev/next link the live symbols.
type symbol struct {
	start, end int
	prev, next int
	frozen     bool // a user-defined piece: never merged further
}

// bigram is a candidate merge of two adjacent symbols. size is their
// combined length when queued: a mismatch on pop means one side has
// changed since, so the entry is stale.
type bigram struct {
	left, right int
	size        int
	score       float32
}

// before orders the queue: best score first, then leftmost, as
// SentencePiece and llama.cpp do.
func (a bigram) before(b bigram) bool {
	if a.score != b.score {
		return a.score > b.score
	}
	return a.left < b.left
}

type bigramHeap []bigram

func (h *bigramHeap) push(b bigram) {
	*h = append(*h, b)
	q := *h
	i := len(q) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !q[i].before(q[p]) {
			break
		}
		q[i], q[p] = q[p], q[i]
		i = p
	}
}

func (h *bigramHeap) pop() bigram {
	q := *h
	top := q[0]
	last := len(q) - 1
	q[0] = q[last]
	q = q[:last]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(q) && q[l].before(q[m]) {
			m = l
		}
		if r < len(q) && q[r].before(q[m]) {
			m = r
		}
		if m == i {
			break
		}
		q[i], q[m] = q[m], q[i]
		i = m
	}
	*h = q
	return top
}

// Encode tokenizes text, prepending BOS when addBOS is set and the
// vocabulary has one. Empty text yields no tokens besides BOS.
func (t *Tokenizer) Encode(text string, addBOS bool) []int {
	out := make([]int, 0, len(text)/3+2)
	if addBOS && t.v.BOS >= 0 {
		out = append(out, t.v.BOS)
	}
	if t.bpe != nil {
		return t.encodeBPEText(out, text)
	}
	return t.encodeInto(out, text)
}

// encodeInto appends the ids of text, escaped and given the dummy prefix
// when the vocabulary asks for one, to out. Empty text adds nothing.
func (t *Tokenizer) encodeInto(out []int, text string) []int {
	if text == "" {
		return out
	}
	if t.bpe != nil {
		return t.encodeBPE(out, text)
	}
	s := strings.ReplaceAll(text, " ", space)
	if t.v.AddSpacePrefix {
		s = space + s
	}

	syms := make([]symbol, 0, len(s))
	for i := 0; i < len(s); {
		n, frozen := t.userDefinedAt(s[i:])
		if n == 0 {
			// Invalid bytes come back as RuneError of width 1: one symbol each.
			_, n = utf8.DecodeRuneInString(s[i:])
		}
		syms = append(syms, symbol{start: i, end: i + n, prev: len(syms) - 1, next: len(syms) + 1, frozen: frozen})
		i += n
	}
	syms[len(syms)-1].next = -1
	// SentencePiece merges the pair whose joined piece scores highest.
	merge(s, syms, func(l, r symbol) (float32, bool) {
		if l.frozen || r.frozen {
			return 0, false
		}
		id, ok := t.pieces[s[l.start:r.end]]
		if !ok {
			return 0, false
		}
		return t.v.Scores[id], true
	})

	for i := 0; i >= 0; i = syms[i].next {
		piece := s[syms[i].start:syms[i].end]
		if id, ok := t.pieces[piece]; ok {
			out = append(out, id)
			continue
		}
		// Only single characters can be left unknown: a merge always
		// produces a known piece.
		if !t.hasBytes {
			out = append(out, t.v.UNK)
			continue
		}
		for j := 0; j < len(piece); j++ {
			if id := t.byteTok[piece[j]]; id >= 0 {
				out = append(out, id)
			} else {
				out = append(out, t.v.UNK)
			}
		}
	}
	return out
}

// merge joins adjacent symbols, best-scoring pair first (leftmost among
// equals), while score gives a pair a score: SentencePiece's and byte-level
// BPE's merge loop. syms is a linked list over s; a merged-away symbol is
// left empty.
func merge(s string, syms []symbol, score func(l, r symbol) (float32, bool)) {
	var q bigramHeap
	tryPair := func(l, r int) {
		if l < 0 || r < 0 {
			return
		}
		if sc, ok := score(syms[l], syms[r]); ok {
			q.push(bigram{left: l, right: r, size: syms[r].end - syms[l].start, score: sc})
		}
	}
	for i := 1; i < len(syms); i++ {
		tryPair(i-1, i)
	}
	for len(q) > 0 {
		b := q.pop()
		l, r := &syms[b.left], &syms[b.right]
		if l.start == l.end || r.start == r.end || l.next != b.right || r.end-l.start != b.size {
			continue
		}
		l.end = r.end
		r.start = r.end
		l.next = r.next
		if r.next >= 0 {
			syms[r.next].prev = b.left
		}
		tryPair(l.prev, b.left)
		tryPair(b.left, l.next)
	}
}

// userDefinedAt returns the length of the longest user-defined piece that
// s starts with, as SentencePiece's prefix matcher does.
func (t *Tokenizer) userDefinedAt(s string) (int, bool) {
	for _, u := range t.userDefined[s[0]] {
		if strings.HasPrefix(s, u) {
			return len(u), true
		}
	}
	return 0, false
}
