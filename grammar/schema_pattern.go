package grammar

import (
	"regexp/syntax"
	"slices"
	"strings"
	"unicode"
)

// pattern: a regular expression (Go's syntax) as GBNF for the contents
// of a JSON string, each character written one of the ways JSON writes
// it.

// pattern is the body for strings that pattern (a regular expression, Go's
// syntax, which the validators of Go use too) matches somewhere in, as
// JSON Schema has it: "^" and "$" anchor it at the ends.
func (g *schemaGen) pattern(p, path, hint string) (string, error) {
	re, err := syntax.Parse(p, syntax.Perl)
	if err != nil {
		return "", scErr(path, "pattern %q: %v", p, err)
	}
	var alts []string
	for _, b := range scParts(re, syntax.OpAlternate) {
		subs := scParts(b, syntax.OpConcat)
		start := len(subs) > 0 && subs[0].Op == syntax.OpBeginText
		if start {
			subs = subs[1:]
		}
		end := len(subs) > 0 && subs[len(subs)-1].Op == syntax.OpEndText
		if end {
			subs = subs[:len(subs)-1]
		}
		r, err := g.re(&syntax.Regexp{Op: syntax.OpConcat, Sub: subs}, path)
		if err != nil {
			return "", err
		}
		if r.never {
			continue
		}
		parts := []string{r.e}
		if !start {
			parts = append([]string{"char*"}, parts...)
		}
		if !end && (start || r.e != "") {
			parts = append(parts, "char*")
		}
		alts = append(alts, scSeq(parts...))
	}
	if len(alts) == 0 {
		return "", nil
	}
	return scInQuotes(g.define(hint+"-pattern", scAlts(alts))), nil
}

// scParts is the operands of r (inside its captures) when it is an op,
// else r alone.
func scParts(r *syntax.Regexp, op syntax.Op) []*syntax.Regexp {
	for r.Op == syntax.OpCapture {
		r = r.Sub[0]
	}
	if r.Op == op {
		return r.Sub
	}
	return []*syntax.Regexp{r}
}

// scRe is a regular expression's GBNF: e ("" the empty text) unless never
// (it matches nothing); nullable when it matches the empty text.
type scRe struct {
	e               string
	nullable, never bool
}

// re is GBNF for the JSON string contents whose decoded text r matches
// whole: each character one of the ways JSON writes it (bar \u escapes).
func (g *schemaGen) re(r *syntax.Regexp, path string) (scRe, error) {
	if err := g.spend(path); err != nil {
		return scRe{}, err
	}
	switch r.Op {
	case syntax.OpNoMatch:
		return scRe{never: true}, nil
	case syntax.OpEmptyMatch:
		return scRe{nullable: true}, nil
	case syntax.OpLiteral, syntax.OpCharClass, syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		return g.reChars(r), nil
	case syntax.OpCapture:
		return g.re(r.Sub[0], path)
	case syntax.OpConcat:
		out := scRe{nullable: true}
		var parts []string
		for _, s := range r.Sub {
			x, err := g.re(s, path)
			if err != nil {
				return scRe{}, err
			}
			if x.never {
				return x, nil
			}
			parts = append(parts, x.e)
			out.nullable = out.nullable && x.nullable
		}
		out.e = scSeq(parts...)
		return out, nil
	case syntax.OpAlternate:
		return g.reAlt(r.Sub, path, g.re)
	case syntax.OpStar, syntax.OpPlus, syntax.OpQuest, syntax.OpRepeat:
		lo, hi := scRepeats(r)
		x, err := g.re(r.Sub[0], path)
		if err != nil {
			return scRe{}, err
		}
		if x.never || x.e == "" {
			if x.never && lo > 0 {
				return x, nil
			}
			return scRe{nullable: true}, nil
		}
		if x.nullable {
			// Repeat what is not empty: a repetition of what can match
			// nothing would loop (and GBNF refuses it).
			if x, err = g.reNonEmpty(r.Sub[0], path); err != nil {
				return scRe{}, err
			}
			if x.never {
				return scRe{nullable: true}, nil
			}
			lo = 0
		}
		item := g.define("pattern-part", x.e)
		if hi < 0 {
			return scRe{e: scSeq(scTimes(item, int64(lo), int64(lo)), item+"*"), nullable: lo == 0}, nil
		}
		return scRe{e: scTimes(item, int64(lo), int64(hi)), nullable: lo == 0}, nil
	}
	return scRe{}, scErr(path, "pattern: %s is not supported (only ^ and $ at the ends of the pattern)", r)
}

// reNonEmpty is GBNF for the non-empty texts that r matches.
func (g *schemaGen) reNonEmpty(r *syntax.Regexp, path string) (scRe, error) {
	if err := g.spend(path); err != nil {
		return scRe{}, err
	}
	switch r.Op {
	case syntax.OpNoMatch, syntax.OpEmptyMatch:
		return scRe{never: true}, nil
	case syntax.OpCapture:
		return g.reNonEmpty(r.Sub[0], path)
	case syntax.OpConcat:
		// The first part that is not empty is part i: those before are
		// empty, those after anything.
		var alts []string
		for i, s := range r.Sub {
			x, err := g.reNonEmpty(s, path)
			if err != nil {
				return scRe{}, err
			}
			rest, err := g.re(&syntax.Regexp{Op: syntax.OpConcat, Sub: r.Sub[i+1:]}, path)
			if err != nil {
				return scRe{}, err
			}
			if !x.never && !rest.never {
				alts = append(alts, scSeq(x.e, rest.e))
			}
			whole, err := g.re(s, path)
			if err != nil {
				return scRe{}, err
			}
			if !whole.nullable {
				break
			}
		}
		return scRe{e: scAlts(alts), never: len(alts) == 0}, nil
	case syntax.OpAlternate:
		return g.reAlt(r.Sub, path, g.reNonEmpty)
	case syntax.OpStar, syntax.OpPlus, syntax.OpQuest, syntax.OpRepeat:
		_, hi := scRepeats(r)
		if hi == 0 {
			return scRe{never: true}, nil
		}
		x, err := g.reNonEmpty(r.Sub[0], path)
		if err != nil || x.never {
			return x, err
		}
		item := g.define("pattern-part", x.e)
		if hi < 0 {
			return scRe{e: item + "+"}, nil
		}
		return scRe{e: scTimes(item, 1, int64(hi))}, nil
	}
	return g.re(r, path) // characters: never empty
}

// reAlt is the alternatives of subs, each as f makes it.
func (g *schemaGen) reAlt(subs []*syntax.Regexp, path string, f func(*syntax.Regexp, string) (scRe, error)) (scRe, error) {
	var alts []string
	nullable := false
	for _, s := range subs {
		x, err := f(s, path)
		if err != nil {
			return scRe{}, err
		}
		if !x.never {
			alts = append(alts, x.e)
			nullable = nullable || x.nullable
		}
	}
	return scRe{e: scAlts(alts), nullable: nullable, never: len(alts) == 0}, nil
}

// scRepeats is how many times a repetition (*, +, ?, {m,n}) takes its
// operand: lo to hi, hi -1 for no bound.
func scRepeats(r *syntax.Regexp) (lo, hi int) {
	switch r.Op {
	case syntax.OpPlus:
		return 1, -1
	case syntax.OpQuest:
		return 0, 1
	case syntax.OpRepeat:
		return r.Min, r.Max
	}
	return 0, -1
}

// reChars is one character of a literal (each of its characters in
// turn), a class, or any character.
func (g *schemaGen) reChars(r *syntax.Regexp) scRe {
	switch r.Op {
	case syntax.OpAnyChar:
		return scRe{e: scUnits([]rune{0, unicode.MaxRune})}
	case syntax.OpAnyCharNotNL:
		return scRe{e: scUnits([]rune{0, '\n' - 1, '\n' + 1, unicode.MaxRune})}
	case syntax.OpCharClass:
		u := scUnits(r.Rune)
		return scRe{e: u, never: u == ""}
	}
	var parts []string
	for _, c := range r.Rune {
		ranges := []rune{c, c}
		if r.Flags&syntax.FoldCase != 0 {
			for f := unicode.SimpleFold(c); f != c; f = unicode.SimpleFold(f) {
				ranges = append(ranges, f, f)
			}
		}
		u := scUnits(ranges)
		if u == "" {
			return scRe{never: true}
		}
		parts = append(parts, u)
	}
	return scRe{e: scSeq(parts...)}
}

// scUnits is GBNF for one character of a JSON string's contents that
// decodes to a character in ranges (pairs lo, hi): the character itself,
// or its short escape (\/ for /). Control characters without a short
// escape are left out (only a \u escape writes them).
func scUnits(ranges []rune) string {
	var raw [][2]rune
	var esc []byte
	for i := 0; i+1 < len(ranges); i += 2 {
		lo, hi := ranges[i], ranges[i+1]
		for _, a := range [][2]rune{{0x20, 0x21}, {0x23, 0x5b}, {0x5d, unicode.MaxRune}} {
			if l, h := max(lo, a[0]), min(hi, a[1]); l <= h {
				raw = append(raw, [2]rune{l, h})
			}
		}
		for _, c := range "\"\\/\b\f\n\r\t" {
			if c >= lo && c <= hi {
				e, ok := scShortEscape(c)
				if !ok {
					e = '/'
				}
				if !slices.Contains(esc, e) {
					esc = append(esc, e)
				}
			}
		}
	}
	var alts []string
	switch {
	case len(raw) == 1 && raw[0][0] == raw[0][1]:
		alts = append(alts, scLit(string(raw[0][0])))
	case len(raw) > 0:
		var b strings.Builder
		b.WriteByte('[')
		for _, x := range raw {
			b.WriteString(scClassChar(x[0]))
			if x[1] > x[0] {
				b.WriteString("-" + scClassChar(x[1]))
			}
		}
		b.WriteByte(']')
		alts = append(alts, b.String())
	}
	if len(esc) > 0 {
		alts = append(alts, scEscapes(esc))
	}
	return scAlts(alts)
}
