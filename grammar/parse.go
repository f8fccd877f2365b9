// Package grammar constrains generation to a context-free grammar written
// in GBNF, llama.cpp's grammar format: rules `name ::= ...` of literals
// ("..."), character classes ([a-z], [^"\\], .), rule names, groups,
// alternatives (|) and repetition (*, +, ?, {m}, {m,}, {m,n}); `root` is
// the start. A Matcher follows the text generated so far and says which
// tokens of a vocabulary may come next.
package grammar

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// A Grammar is compiled GBNF: rules of alternatives of sequences, each
// element a character class or a reference to a rule. Groups and
// repetitions become rules of their own.
type Grammar struct {
	rules [][]seq
	names []string // rule i's name; generated ones are name_N
	root  int
}

type seq []elem

// elem matches one character (ranges, or their complement when neg) or,
// with ref >= 0, a whole rule.
type elem struct {
	ref    int
	ranges []rng
	neg    bool
}

type rng struct{ lo, hi rune }

func (e *elem) matches(c rune) bool {
	for _, r := range e.ranges {
		if c >= r.lo && c <= r.hi {
			return !e.neg
		}
	}
	return e.neg
}

// Error is a grammar's syntax or structure error, with where it is.
type Error struct {
	Line, Col int // 1-based; 0 when the error is not at one place
	Msg       string
}

func (e *Error) Error() string {
	if e.Line == 0 {
		return "grammar: " + e.Msg
	}
	return fmt.Sprintf("grammar: line %d, column %d: %s", e.Line, e.Col, e.Msg)
}

// Parse compiles GBNF text. Every rule used must be defined, `root` must
// be, and no rule may reach itself before matching a character (left
// recursion, which a top-down matcher cannot follow).
func Parse(src string) (*Grammar, error) {
	p := &parser{src: src, g: &Grammar{}, ids: map[string]int{}, defined: map[string]bool{}, used: map[string]int{}}
	if err := p.grammar(); err != nil {
		return nil, err
	}
	for name, at := range p.used {
		if !p.defined[name] {
			l, c := p.lineCol(at)
			return nil, &Error{l, c, fmt.Sprintf("rule %q is used but not defined", name)}
		}
	}
	root, ok := p.ids["root"]
	if !ok || !p.defined["root"] {
		return nil, &Error{Msg: `no rule "root" (the start)`}
	}
	p.g.root = root
	if err := p.g.checkLeftRecursion(); err != nil {
		return nil, err
	}
	if newAutomaton(p.g).start() == nil {
		return nil, &Error{Msg: fmt.Sprintf("more than %d ways to read the start of a text (an ambiguous grammar)", maxStacks)}
	}
	return p.g, nil
}

type parser struct {
	src     string
	pos     int
	depth   int // of the groups open
	size    int // elements written out by repetitions
	g       *Grammar
	ids     map[string]int
	defined map[string]bool
	used    map[string]int // a name and where it was first used
}

func (p *parser) lineCol(at int) (int, int) {
	before := p.src[:at]
	line := strings.Count(before, "\n") + 1
	return line, utf8.RuneCountInString(before[strings.LastIndexByte(before, '\n')+1:]) + 1
}

func (p *parser) fail(format string, a ...any) error {
	l, c := p.lineCol(p.pos)
	return &Error{l, c, fmt.Sprintf(format, a...)}
}

// rule returns the id of the named rule, making it if new.
func (p *parser) rule(name string) int {
	if id, ok := p.ids[name]; ok {
		return id
	}
	id := len(p.g.rules)
	p.ids[name] = id
	p.g.rules = append(p.g.rules, nil)
	p.g.names = append(p.g.names, name)
	return id
}

// fresh makes an unnamed rule for a group or a repetition inside base.
func (p *parser) fresh(base string, alts []seq) int {
	id := len(p.g.rules)
	p.g.rules = append(p.g.rules, alts)
	p.g.names = append(p.g.names, fmt.Sprintf("%s_%d", base, id))
	return id
}

func (p *parser) peek() byte {
	if p.pos < len(p.src) {
		return p.src[p.pos]
	}
	return 0
}

// space skips blanks and comments, and newlines too when nl.
func (p *parser) space(nl bool) {
	for p.pos < len(p.src) {
		switch c := p.src[p.pos]; {
		case c == ' ' || c == '\t':
			p.pos++
		case c == '#':
			for p.pos < len(p.src) && p.src[p.pos] != '\n' {
				p.pos++
			}
		case (c == '\n' || c == '\r') && nl:
			p.pos++
		default:
			return
		}
	}
}

func isNameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
}

func (p *parser) name() string {
	s := p.pos
	for p.pos < len(p.src) && isNameByte(p.src[p.pos]) {
		p.pos++
	}
	return p.src[s:p.pos]
}

func (p *parser) grammar() error {
	for {
		p.space(true)
		if p.pos >= len(p.src) {
			return nil
		}
		at := p.pos
		name := p.name()
		if name == "" {
			return p.fail("want a rule name, found %q", p.rest())
		}
		p.space(false)
		if !strings.HasPrefix(p.src[p.pos:], "::=") {
			return p.fail("want ::= after rule name %q", name)
		}
		p.pos += 3
		if p.defined[name] {
			p.pos = at
			return p.fail("rule %q is defined twice", name)
		}
		p.defined[name] = true
		id := p.rule(name)
		p.space(true)
		alts, err := p.alternatives(name, false)
		if err != nil {
			return err
		}
		p.g.rules[id] = alts
		if c := p.peek(); c != 0 && c != '\n' && c != '\r' {
			return p.fail("unexpected %q", p.rest())
		}
	}
}

// rest is a short view of what is left, for errors.
func (p *parser) rest() string {
	s := p.src[p.pos:]
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		s = s[:i]
	}
	if len(s) > 20 {
		s = s[:20] + "..."
	}
	return s
}

// alternatives parses seq | seq | ...; nested (inside parentheses) lets
// sequences run over newlines.
func (p *parser) alternatives(base string, nested bool) ([]seq, error) {
	var alts []seq
	for {
		s, err := p.sequence(base, nested)
		if err != nil {
			return nil, err
		}
		alts = append(alts, s)
		if p.peek() != '|' {
			return alts, nil
		}
		p.pos++
		p.space(true)
	}
}

func (p *parser) sequence(base string, nested bool) (seq, error) {
	var out seq
	last := -1 // where the last item starts in out: what a repetition repeats
	for {
		c := p.peek()
		start := len(out)
		switch {
		case c == '"':
			p.pos++
			for p.peek() != '"' {
				if p.pos >= len(p.src) {
					return nil, p.fail("unterminated string")
				}
				r, err := p.char()
				if err != nil {
					return nil, err
				}
				out = append(out, elem{ref: -1, ranges: []rng{{r, r}}})
			}
			p.pos++
		case c == '[':
			p.pos++
			e := elem{ref: -1}
			if p.peek() == '^' {
				e.neg = true
				p.pos++
			}
			for p.peek() != ']' {
				if p.pos >= len(p.src) {
					return nil, p.fail("unterminated character class")
				}
				lo, err := p.char()
				if err != nil {
					return nil, err
				}
				hi := lo
				if p.peek() == '-' && p.pos+1 < len(p.src) && p.src[p.pos+1] != ']' {
					p.pos++
					if hi, err = p.char(); err != nil {
						return nil, err
					}
					if hi < lo {
						return nil, p.fail("range %q-%q is backwards", lo, hi)
					}
				}
				e.ranges = append(e.ranges, rng{lo, hi})
			}
			p.pos++
			out = append(out, e)
		case c == '.':
			p.pos++
			out = append(out, elem{ref: -1, neg: true}) // no range excluded: any character
		case c == '(':
			if p.depth++; p.depth > maxDepth {
				return nil, p.fail("groups nested more than %d deep", maxDepth)
			}
			p.pos++
			p.space(true)
			alts, err := p.alternatives(base, true)
			p.depth--
			if err != nil {
				return nil, err
			}
			if p.peek() != ')' {
				return nil, p.fail("want ) to close the group, found %q", p.rest())
			}
			p.pos++
			out = append(out, elem{ref: p.fresh(base, alts)})
		case isNameByte(c):
			at := p.pos
			name := p.name()
			if _, ok := p.used[name]; !ok {
				p.used[name] = at
			}
			out = append(out, elem{ref: p.rule(name)})
		case c == '*' || c == '+' || c == '?' || c == '{':
			if last < 0 {
				return nil, p.fail("%q repeats nothing", c)
			}
			lo, hi, err := p.repetition()
			if err != nil {
				return nil, err
			}
			n := len(out[last:]) * max(lo, hi)
			if n > maxRepeat {
				return nil, p.fail("a repetition of %d elements (at most %d)", n, maxRepeat)
			}
			if p.size += n; p.size > maxSize {
				return nil, p.fail("the repetitions write out more than %d elements in all", maxSize)
			}
			out = append(out[:last], p.repeat(base, out[last:], lo, hi)...)
			p.space(nested)
			continue
		default:
			return out, nil
		}
		last = start
		p.space(nested)
	}
}

// maxRepeat bounds what one repetition writes out, so that nested counts
// ("a"{1000}){1000} cannot fill the memory, and maxSize what they all do;
// maxDepth bounds the nesting of groups, which the parser follows by
// recursion. A grammar comes from a request body of up to 4 MiB.
const maxRepeat, maxSize, maxDepth = 100000, 1000000, 1000

// repetition parses * + ? {m} {m,} {m,n} {,n}; hi < 0 is no bound.
func (p *parser) repetition() (lo, hi int, err error) {
	switch p.peek() {
	case '*':
		p.pos++
		return 0, -1, nil
	case '+':
		p.pos++
		return 1, -1, nil
	case '?':
		p.pos++
		return 0, 1, nil
	}
	p.pos++ // {
	p.space(false)
	num := func() (int, bool, error) {
		s := p.pos
		for p.peek() >= '0' && p.peek() <= '9' {
			p.pos++
		}
		if s == p.pos {
			return 0, false, nil
		}
		n, err := strconv.Atoi(p.src[s:p.pos])
		if err != nil || n > 1000 {
			return 0, false, p.fail("repetition count %s is too large (at most 1000)", p.src[s:p.pos])
		}
		return n, true, nil
	}
	lo, given, err := num()
	if err != nil {
		return 0, 0, err
	}
	hi = lo
	p.space(false)
	if p.peek() == ',' {
		p.pos++
		p.space(false)
		n, ok, err := num()
		if err != nil {
			return 0, 0, err
		}
		hi = -1
		if ok {
			hi, given = n, true
		}
	}
	p.space(false)
	if p.peek() != '}' {
		return 0, 0, p.fail("want } to close the repetition, found %q", p.rest())
	}
	if !given {
		return 0, 0, p.fail("a repetition {} or {,} needs a count")
	}
	p.pos++
	if hi >= 0 && hi < lo {
		return 0, 0, p.fail("repetition {%d,%d} has its bounds backwards", lo, hi)
	}
	return lo, hi, nil
}

// repeat is item (a character or a rule reference, or a literal's
// characters) lo to hi times (hi < 0: no bound), as elements: lo copies,
// then for no bound a rule R ::= item R | (empty), else hi-lo nested
// optional copies, R ::= item R' | (empty).
func (p *parser) repeat(base string, item seq, lo, hi int) seq {
	item = append(seq(nil), item...)
	var out seq
	for range lo {
		out = append(out, item...)
	}
	switch {
	case hi < 0:
		id := p.fresh(base, nil)
		p.g.rules[id] = []seq{append(append(seq(nil), item...), elem{ref: id}), {}}
		out = append(out, elem{ref: id})
	case hi > lo:
		next := -1
		for range hi - lo {
			alt := append(seq(nil), item...)
			if next >= 0 {
				alt = append(alt, elem{ref: next})
			}
			next = p.fresh(base, []seq{alt, {}})
		}
		out = append(out, elem{ref: next})
	}
	return out
}

// char reads one character of a literal or class, escapes included.
func (p *parser) char() (rune, error) {
	c := p.peek()
	if c != '\\' {
		r, n := utf8.DecodeRuneInString(p.src[p.pos:])
		if r == utf8.RuneError && n <= 1 {
			return 0, p.fail("invalid UTF-8")
		}
		p.pos += n
		return r, nil
	}
	p.pos++
	e := p.peek()
	p.pos++
	switch e {
	case 'n':
		return '\n', nil
	case 'r':
		return '\r', nil
	case 't':
		return '\t', nil
	case '\\', '"', '[', ']', '-', '^', '/':
		return rune(e), nil
	case 'x', 'u', 'U':
		n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[e]
		if p.pos+n > len(p.src) {
			return 0, p.fail("short \\%c escape", e)
		}
		v, err := strconv.ParseUint(p.src[p.pos:p.pos+n], 16, 32)
		if err != nil || v > utf8.MaxRune {
			return 0, p.fail("bad \\%c escape %q", e, p.src[p.pos:p.pos+n])
		}
		p.pos += n
		return rune(v), nil
	}
	p.pos--
	return 0, p.fail("unknown escape %q", "\\"+string([]byte{e}))
}

// checkLeftRecursion refuses a rule that can reach itself through the
// leading elements of its alternatives without a character matched
// between: the matcher would expand it for ever.
func (g *Grammar) checkLeftRecursion() error {
	nullable := make([]bool, len(g.rules))
	for changed := true; changed; {
		changed = false
		for i, alts := range g.rules {
			if nullable[i] {
				continue
			}
			for _, s := range alts {
				if g.allNullable(s, nullable) {
					nullable[i], changed = true, true
					break
				}
			}
		}
	}
	// state: 0 unseen, 1 on the path, 2 done
	state := make([]byte, len(g.rules))
	var visit func(r int) error
	visit = func(r int) error {
		state[r] = 1
		for _, s := range g.rules[r] {
			for _, e := range s {
				if e.ref < 0 {
					break
				}
				switch state[e.ref] {
				case 1:
					return &Error{Msg: fmt.Sprintf("rule %q is left-recursive: it reaches itself before matching a character (a repetition of what can match nothing does too)", g.names[e.ref])}
				case 0:
					if err := visit(e.ref); err != nil {
						return err
					}
				}
				if !nullable[e.ref] {
					break
				}
			}
		}
		state[r] = 2
		return nil
	}
	for r := range g.rules {
		if state[r] == 0 {
			if err := visit(r); err != nil {
				return err
			}
		}
	}
	return nil
}

func (g *Grammar) allNullable(s seq, nullable []bool) bool {
	for _, e := range s {
		if e.ref < 0 || !nullable[e.ref] {
			return false
		}
	}
	return true
}
