package grammar

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"
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
// on when the alternative ends. Frames are interned by their automaton
// (equal ones are one pointer, with an id), shared by the stacks that
// continue alike, and never changed.
type frame struct {
	fkey
	id int32
}

type fkey struct {
	rule, alt, idx int32
	up             *frame
}

// maxStacks bounds a state: an ambiguous grammar (x* x*) can keep many
// ways of reading the same text at once.
const maxStacks = 4096

// ErrTooAmbiguous is returned when a state would hold more than maxStacks
// stacks.
var ErrTooAmbiguous = fmt.Errorf("grammar: more than %d ways to read the text at once (an ambiguous grammar)", maxStacks)

// stacks is a set of stacks: the frames at their tops, nil for a stack
// that has run off the root's end (the text so far is a match).
type stacks []*frame

// state is a set of stacks, interned, with the states each character
// leads to as they are found: a mask over a vocabulary's trie steps from
// the same few states by the same characters again and again.
type state struct {
	s     stacks // sorted by frame id, nil first; no two alike
	done  bool
	ascii [128]*state
	other map[rune]*state
}

// dead is the state of no stacks: the text can no longer match.
var dead = &state{}

// automaton interns a grammar's frames and states. It grows with the
// states a text goes through, and belongs to one matcher (no locks).
type automaton struct {
	g      *Grammar
	frames map[fkey]*frame
	states map[string]*state
	buf    stacks
	key    []byte
	// ambiguous: some step was refused for holding too many stacks.
	ambiguous bool
}

func newAutomaton(g *Grammar) *automaton {
	return &automaton{g: g, frames: map[fkey]*frame{}, states: map[string]*state{}}
}

func (a *automaton) frame(k fkey) *frame {
	f, ok := a.frames[k]
	if !ok {
		f = &frame{k, int32(len(a.frames))}
		a.frames[k] = f
	}
	return f
}

// start is the state before any text.
func (a *automaton) start() *state {
	a.buf = a.buf[:0]
	g := a.g
	for alt := range g.rules[g.root] {
		a.buf = a.expand(a.frame(fkey{int32(g.root), int32(alt), 0, nil}), a.buf)
	}
	return a.intern(a.buf)
}

// expand adds to out the stacks that f leads to whose tops are character
// classes (or nil, the end of the root).
func (a *automaton) expand(f *frame, out stacks) stacks {
	g := a.g
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
		ret = a.frame(fkey{f.rule, f.alt, f.idx + 1, f.up})
	}
	for alt := range g.rules[e.ref] {
		out = a.expand(a.frame(fkey{int32(e.ref), int32(alt), 0, ret}), out)
		if len(out) > 4*maxStacks {
			return out // intern refuses it
		}
	}
	return out
}

// intern gives the state of the stacks s (which it may reorder).
func (a *automaton) intern(s stacks) *state {
	if len(s) == 0 {
		return dead
	}
	slices.SortFunc(s, func(x, y *frame) int { return cmp.Compare(frameID(x), frameID(y)) })
	s = slices.Compact(s)
	if len(s) > maxStacks {
		return nil
	}
	a.key = a.key[:0]
	for _, f := range s {
		a.key = binary.LittleEndian.AppendUint32(a.key, uint32(frameID(f)))
	}
	if st, ok := a.states[string(a.key)]; ok {
		return st
	}
	st := &state{s: slices.Clone(s), done: s[0] == nil}
	a.states[string(a.key)] = st
	return st
}

func frameID(f *frame) int32 {
	if f == nil {
		return -1
	}
	return f.id
}

// next is the state after character c: dead if no stack takes it, nil if
// too many would.
func (a *automaton) next(st *state, c rune) *state {
	if c < 128 {
		if n := st.ascii[c]; n != nil {
			return n
		}
	} else if n, ok := st.other[c]; ok {
		return n
	}
	a.buf = a.buf[:0]
	for _, f := range st.s {
		if f == nil {
			continue
		}
		if e := &a.g.rules[f.rule][f.alt][f.idx]; e.matches(c) {
			a.buf = a.expand(a.frame(fkey{f.rule, f.alt, f.idx + 1, f.up}), a.buf)
		}
	}
	n := a.intern(a.buf)
	if n == nil {
		a.ambiguous = true
		return nil
	}
	if c < 128 {
		st.ascii[c] = n
	} else {
		if st.other == nil {
			st.other = map[rune]*state{}
		}
		st.other[c] = n
	}
	return n
}

// MatchString says whether the grammar matches the whole of text.
func (g *Grammar) MatchString(text string) bool {
	st, ok := g.run(text)
	return ok && st.done
}

// Prefix says whether text can be continued into a match (a whole match
// included).
func (g *Grammar) Prefix(text string) bool {
	_, ok := g.run(text)
	return ok
}

func (g *Grammar) run(text string) (*state, bool) {
	a := newAutomaton(g)
	st := a.start()
	for _, c := range text {
		if st = a.next(st, c); st == nil || st == dead {
			return nil, false
		}
	}
	return st, true
}

// partial is the start of a UTF-8 character that a token ended before its
// end: its bytes, and how many more it needs.
type partial struct {
	b    [4]byte
	n    int // bytes held
	need int // bytes still to come
}

// feed adds byte c to the text: a whole character goes through the
// automaton, part of one waits in p. ok is false if the grammar (or
// UTF-8) refuses it; the state is nil only when it would be too
// ambiguous.
func (a *automaton) feed(st *state, p partial, c byte) (*state, partial, bool) {
	if p.need == 0 {
		switch {
		case c < 0x80:
			n := a.next(st, rune(c))
			return n, p, n != nil && n != dead
		case c&0xe0 == 0xc0 && c >= 0xc2:
			p.need = 1
		case c&0xf0 == 0xe0:
			p.need = 2
		case c&0xf8 == 0xf0 && c <= 0xf4:
			p.need = 3
		default:
			return dead, p, false
		}
		p.b[0], p.n = c, 1
		return st, p, a.couldTake(st, p)
	}
	if c&0xc0 != 0x80 {
		return dead, p, false
	}
	p.b[p.n], p.n, p.need = c, p.n+1, p.need-1
	if p.need > 0 {
		return st, p, a.couldTake(st, p)
	}
	r, size := utf8.DecodeRune(p.b[:p.n])
	if r == utf8.RuneError && size <= 1 {
		return dead, partial{}, false // overlong or a surrogate
	}
	n := a.next(st, r)
	return n, partial{}, n != nil && n != dead
}

// couldTake says whether some stack takes a character that starts with
// p's bytes: their range, [lo, hi], meets a stack's class.
func (a *automaton) couldTake(st *state, p partial) bool {
	lo, hi := partialRange(p)
	if lo > hi {
		return false
	}
	for _, f := range st.s {
		if f == nil {
			continue
		}
		e := &a.g.rules[f.rule][f.alt][f.idx]
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

// partialRange is the code points a UTF-8 prefix can still become: those
// its bytes start, less the ones its length may not encode (overlong
// forms, past U+10FFFF) and the surrogates. lo > hi when there are none.
func partialRange(p partial) (lo, hi rune) {
	lo, hi = prefixRange(p)
	n := p.n + p.need
	lo = max(lo, [5]rune{0, 0, 0x80, 0x800, 0x10000}[n])
	hi = min(hi, utf8.MaxRune)
	if n == 3 && lo >= 0xd800 && hi <= 0xdfff {
		return 1, 0
	}
	return lo, hi
}

func prefixRange(p partial) (lo, hi rune) {
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
