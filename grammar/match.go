package grammar

import (
	"fmt"
	"unicode/utf8"
)

// The matcher is a nondeterministic pushdown automaton, as llama.cpp's: a
// state is a set of stacks, each a path of positions in the rules from the
// root down to the next character class to match; a character moves each
// stack whose class takes it past that class, expanding rule references
// (a reference pushes the position after it and starts every alternative
// of the rule). A stack that runs off the root's end has matched a whole
// text: it is nil in the set.

// frame is a position in a rule's alternative, and below it where to go
// on when the alternative ends. Frames are shared by the stacks that
// continue alike, and never changed.
type frame struct {
	rule, alt, idx int32
	up             *frame
}

// maxStacks bounds a state: an ambiguous grammar (x* x*) can keep many
// ways of reading the same text at once.
const maxStacks = 4096

// ErrTooAmbiguous is returned when a state would hold more than maxStacks
// stacks.
var ErrTooAmbiguous = fmt.Errorf("grammar: more than %d ways to read the text at once (an ambiguous grammar)", maxStacks)

// stacks is one state: the frames at the tops of its stacks.
type stacks []*frame

// start is the state before any text.
func (g *Grammar) start() stacks {
	var out stacks
	for a := range g.rules[g.root] {
		out = g.expand(&frame{int32(g.root), int32(a), 0, nil}, out)
	}
	return dedup(out)
}

// expand adds to out the stacks that f leads to whose tops are character
// classes (or nil, the end of the root).
func (g *Grammar) expand(f *frame, out stacks) stacks {
	for f != nil && int(f.idx) == len(g.rules[f.rule][f.alt]) {
		f = f.up
	}
	if f == nil {
		return append(out, nil)
	}
	e := &g.rules[f.rule][f.alt][f.idx]
	if e.ref < 0 {
		return append(out, f)
	}
	// A reference that ends its alternative returns straight to the frame
	// below: right recursion (a repetition's R ::= x R) stays one frame deep.
	ret := f.up
	if int(f.idx)+1 < len(g.rules[f.rule][f.alt]) {
		ret = &frame{f.rule, f.alt, f.idx + 1, f.up}
	}
	for a := range g.rules[e.ref] {
		out = g.expand(&frame{int32(e.ref), int32(a), 0, ret}, out)
	}
	return out
}

// step is the state after character c; empty if no stack takes it.
func (g *Grammar) step(s stacks, c rune, out stacks) stacks {
	out = out[:0]
	for _, f := range s {
		if f == nil {
			continue
		}
		if e := &g.rules[f.rule][f.alt][f.idx]; e.matches(c) {
			out = g.expand(&frame{f.rule, f.alt, f.idx + 1, f.up}, out)
		}
	}
	return dedup(out)
}

// dedup drops stacks equal to an earlier one (the same positions all the
// way down), which ambiguous grammars make.
func dedup(s stacks) stacks {
	if len(s) < 2 {
		return s
	}
	out := s[:1]
	for _, f := range s[1:] {
		dup := false
		for _, o := range out {
			if same(f, o) {
				dup = true
				break
			}
		}
		if !dup {
			out = append(out, f)
		}
	}
	return out
}

func same(a, b *frame) bool {
	for a != b {
		if a == nil || b == nil || a.rule != b.rule || a.alt != b.alt || a.idx != b.idx {
			return false
		}
		a, b = a.up, b.up
	}
	return true
}

// done says whether the text so far is a whole match.
func (s stacks) done() bool {
	for _, f := range s {
		if f == nil {
			return true
		}
	}
	return false
}

// MatchString says whether the grammar matches the whole of text.
func (g *Grammar) MatchString(text string) bool {
	s := g.start()
	var buf stacks
	for _, c := range text {
		buf = g.step(s, c, buf)
		s, buf = buf, s
		if len(s) == 0 {
			return false
		}
	}
	return s.done()
}

// Prefix says whether text can be continued into a match (a whole match
// included).
func (g *Grammar) Prefix(text string) bool {
	s := g.start()
	var buf stacks
	for _, c := range text {
		buf = g.step(s, c, buf)
		s, buf = buf, s
		if len(s) == 0 {
			return false
		}
	}
	return true
}

// partial is the start of a UTF-8 character that a token ended before its
// end: its bytes, and how many more it needs.
type partial struct {
	b    [4]byte
	n    int // bytes held
	need int // bytes still to come
}

// feed adds byte c to the text: a whole character goes through the
// grammar, part of one waits in p. ok is false if the grammar (or UTF-8)
// refuses it.
func (g *Grammar) feed(s stacks, p partial, c byte, buf stacks) (stacks, partial, bool) {
	if p.need == 0 {
		switch {
		case c < 0x80:
			out := g.step(s, rune(c), buf)
			return out, p, len(out) > 0
		case c&0xe0 == 0xc0 && c >= 0xc2:
			p.need = 1
		case c&0xf0 == 0xe0:
			p.need = 2
		case c&0xf8 == 0xf0 && c <= 0xf4:
			p.need = 3
		default:
			return nil, p, false
		}
		p.b[0], p.n = c, 1
		return s, p, g.couldTake(s, p)
	}
	if c&0xc0 != 0x80 {
		return nil, p, false
	}
	p.b[p.n], p.n, p.need = c, p.n+1, p.need-1
	if p.need > 0 {
		return s, p, g.couldTake(s, p)
	}
	r, size := utf8.DecodeRune(p.b[:p.n])
	if r == utf8.RuneError && size <= 1 {
		return nil, partial{}, false // overlong or a surrogate
	}
	out := g.step(s, r, buf)
	return out, partial{}, len(out) > 0
}

// couldTake says whether some stack takes a character that starts with
// p's bytes: their range, [lo, hi], meets a stack's class.
func (g *Grammar) couldTake(s stacks, p partial) bool {
	lo, hi := partialRange(p)
	for _, f := range s {
		if f == nil {
			continue
		}
		e := &g.rules[f.rule][f.alt][f.idx]
		if e.neg {
			// The complement of the ranges meets [lo, hi] unless they
			// cover it whole.
			if !covers(e.ranges, lo, hi) {
				return true
			}
			continue
		}
		for _, r := range e.ranges {
			if r.lo <= hi && r.hi >= lo {
				return true
			}
		}
	}
	return false
}

// partialRange is the code points a UTF-8 prefix can still become.
func partialRange(p partial) (lo, hi rune) {
	n := p.n + p.need
	var lead rune
	switch n {
	case 2:
		lead = rune(p.b[0] & 0x1f)
	case 3:
		lead = rune(p.b[0] & 0x0f)
	default:
		lead = rune(p.b[0] & 0x07)
	}
	lo = lead
	for i := 1; i < p.n; i++ {
		lo = lo<<6 | rune(p.b[i]&0x3f)
	}
	hi = lo
	for range p.need {
		lo, hi = lo<<6, hi<<6|0x3f
	}
	return lo, hi
}

func covers(rs []rng, lo, hi rune) bool {
	for lo <= hi {
		moved := false
		for _, r := range rs {
			if r.lo <= lo && r.hi >= lo {
				if r.hi >= hi {
					return true
				}
				lo, moved = r.hi+1, true
			}
		}
		if !moved {
			return false
		}
	}
	return true
}
