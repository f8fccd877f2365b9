package grammar

import (
	"fmt"
	"slices"
)

// Vocab is a vocabulary as the matcher reads it: each token's text as it
// would be generated, in a trie, so that the tokens that share a start
// share the grammar's work on it, and the ids that end a text.
type Vocab struct {
	root   node
	pieces [][]byte
	ends   []int
}

type node struct {
	kids []edge
	toks []int32
}

type edge struct {
	b byte
	n *node
}

// NewVocab takes each token's text (nil or empty for a token that is no
// text, a control token: the grammar never allows it) and the ids that end
// a text (EOS, end of turn), which it allows once the grammar has matched.
func NewVocab(pieces [][]byte, ends []int) *Vocab {
	v := &Vocab{pieces: pieces, ends: ends}
	for id, p := range pieces {
		if len(p) == 0 || slices.Contains(ends, id) {
			continue
		}
		n := &v.root
		for _, b := range p {
			i, found := slices.BinarySearchFunc(n.kids, b, func(e edge, b byte) int { return int(e.b) - int(b) })
			if !found {
				n.kids = slices.Insert(n.kids, i, edge{b, &node{}})
			}
			n = n.kids[i].n
		}
		n.toks = append(n.toks, int32(id))
	}
	return v
}

// Size is the number of tokens.
func (v *Vocab) Size() int { return len(v.pieces) }

// A Matcher follows one generated text through a grammar.
type Matcher struct {
	a  *automaton
	v  *Vocab
	st *state
	p  partial
}

// NewMatcher starts a text.
func (g *Grammar) NewMatcher(v *Vocab) *Matcher {
	a := newAutomaton(g)
	return &Matcher{a: a, v: v, st: a.start()}
}

// Done says whether the text so far is a whole match, so that an end
// token may come.
func (m *Matcher) Done() bool { return m.p.need == 0 && m.st.done }

// Allowed sets mask[id] (len(mask) is the vocabulary's size) to whether
// token id may come next: its text keeps the text a prefix of a match, or
// it ends the text and the text is a whole match. It returns how many are
// allowed.
func (m *Matcher) Allowed(mask []bool) int {
	clear(mask)
	n := m.walk(&m.v.root, m.st, m.p, mask)
	if m.Done() {
		for _, id := range m.v.ends {
			if id >= 0 && id < len(mask) && !mask[id] {
				mask[id] = true
				n++
			}
		}
	}
	return n
}

func (m *Matcher) walk(n *node, st *state, p partial, mask []bool) int {
	count := 0
	for _, id := range n.toks {
		mask[id] = true
		count++
	}
	for _, e := range n.kids {
		if nst, np, ok := m.a.feed(st, p, e.b); ok {
			count += m.walk(e.n, nst, np, mask)
		}
	}
	return count
}

// Ambiguous says whether some text was refused because the grammar would
// read it in more than maxStacks ways at once, rather than for not fitting.
func (m *Matcher) Ambiguous() bool { return m.a.ambiguous }

// Allows says whether token id may come next, as Allowed would set it:
// for a caller that tries the likeliest tokens first.
func (m *Matcher) Allows(id int) bool {
	if id < 0 || id >= len(m.v.pieces) {
		return false
	}
	if slices.Contains(m.v.ends, id) {
		return m.Done()
	}
	piece := m.v.pieces[id]
	st, p := m.st, m.p
	for _, b := range piece {
		var ok bool
		if st, p, ok = m.a.feed(st, p, b); !ok {
			return false
		}
	}
	return len(piece) > 0
}

// Accept moves the text on by token id, which must be allowed.
func (m *Matcher) Accept(id int) error {
	if id < 0 || id >= len(m.v.pieces) {
		return fmt.Errorf("grammar: token %d is outside the vocabulary", id)
	}
	if slices.Contains(m.v.ends, id) {
		if !m.Done() {
			return fmt.Errorf("grammar: the text ended (token %d) before the grammar was matched", id)
		}
		return nil
	}
	piece := m.v.pieces[id]
	if len(piece) == 0 {
		return fmt.Errorf("grammar: token %d has no text the grammar could match", id)
	}
	st, p := m.st, m.p
	for _, b := range piece {
		nst, np, ok := m.a.feed(st, p, b)
		if !ok {
			if nst == nil {
				return ErrTooAmbiguous
			}
			return fmt.Errorf("grammar: token %d (%q) does not fit the grammar here", id, piece)
		}
		st, p = nst, np
	}
	m.st, m.p = st, p
	return nil
}
