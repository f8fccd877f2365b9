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
	g    *Grammar
	v    *Vocab
	s    stacks
	p    partial
	bufs []stacks // walk's, a level deep each
}

// NewMatcher starts a text.
func (g *Grammar) NewMatcher(v *Vocab) *Matcher {
	return &Matcher{g: g, v: v, s: g.start()}
}

// Done says whether the text so far is a whole match, so that an end
// token may come.
func (m *Matcher) Done() bool { return m.p.need == 0 && m.s.done() }

// Allowed sets mask[id] (len(mask) is the vocabulary's size) to whether
// token id may come next: its text keeps the text a prefix of a match, or
// it ends the text and the text is a whole match. It returns how many are
// allowed.
func (m *Matcher) Allowed(mask []bool) int {
	clear(mask)
	n := m.walk(&m.v.root, m.s, m.p, 0, mask)
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

func (m *Matcher) walk(n *node, s stacks, p partial, depth int, mask []bool) int {
	count := 0
	for _, id := range n.toks {
		mask[id] = true
		count++
	}
	if depth == len(m.bufs) {
		m.bufs = append(m.bufs, nil)
	}
	for _, e := range n.kids {
		ns, np, ok := m.g.feed(s, p, e.b, m.bufs[depth])
		if ok {
			if len(ns) > maxStacks {
				continue
			}
			count += m.walk(e.n, ns, np, depth+1, mask)
		}
		if np.need == 0 && ns != nil {
			m.bufs[depth] = ns[:0] // a step wrote it: keep it, grown or not
		}
	}
	return count
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
	s, p := m.s, m.p
	for _, b := range piece {
		ns, np, ok := m.g.feed(s, p, b, nil)
		if !ok {
			return fmt.Errorf("grammar: token %d (%q) does not fit the grammar here", id, piece)
		}
		if len(ns) > maxStacks {
			return ErrTooAmbiguous
		}
		s, p = ns, np
	}
	m.s, m.p = s, p
	return nil
}
