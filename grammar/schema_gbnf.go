package grammar

import (
	"fmt"
	"strconv"
	"strings"
)

// GBNF text: literals, classes, sequences, alternatives and repetitions
// as the generator writes them, and the helper rules a grammar may use.

// scLit is s as a GBNF literal.
func scLit(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// scUnlit reads back a literal of scLit.
func scUnlit(lit string) string {
	var b strings.Builder
	for i := 1; i < len(lit)-1; i++ {
		c := lit[i]
		if c != '\\' {
			b.WriteByte(c)
			continue
		}
		i++
		if lit[i] == 'x' {
			v, _ := strconv.ParseUint(lit[i+1:i+3], 16, 8)
			b.WriteByte(byte(v))
			i += 2
		} else {
			b.WriteByte(lit[i])
		}
	}
	return b.String()
}

// scClassChar is r inside a GBNF character class.
func scClassChar(r rune) string {
	switch {
	case r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z':
		return string(r)
	case r < 0x80:
		return fmt.Sprintf(`\x%02x`, r)
	case r >= 0x10000:
		return fmt.Sprintf(`\U%08x`, r)
	}
	return fmt.Sprintf(`\u%04x`, r)
}

// scEscapes is a backslash and one of the escape letters esc.
func scEscapes(esc []byte) string {
	var b strings.Builder
	for _, e := range esc {
		b.WriteString(scClassChar(rune(e)))
	}
	return `"\\" [` + b.String() + "]"
}

// scSimple says whether a GBNF expression is one rule name or one
// literal, which can stand anywhere in a sequence.
func scSimple(e string) bool {
	if e == "" {
		return false
	}
	if e[0] == '"' {
		for i := 1; i < len(e); i++ {
			switch e[i] {
			case '\\':
				i++
			case '"':
				return i == len(e)-1
			}
		}
		return false
	}
	for i := 0; i < len(e); i++ {
		if !isNameByte(e[i]) {
			return false
		}
	}
	return true
}

// scAlts joins alternatives; empty ones make the whole optional.
func scAlts(alts []string) string {
	var out []string
	empty := false
	seen := map[string]bool{}
	for _, a := range alts {
		if a == "" {
			empty = true
		} else if !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	switch {
	case len(out) == 0:
		return ""
	case empty:
		return scOpt(strings.Join(out, " | "))
	}
	return strings.Join(out, " | ")
}

// scSeq joins the non-empty parts of a sequence, grouping any that has
// alternatives of its own.
func scSeq(parts ...string) string {
	var out []string
	for _, p := range parts {
		if p != "" {
			out = append(out, scGroup(p))
		}
	}
	return strings.Join(out, " ")
}

// scGroup wraps e in parentheses when it has alternatives at its top.
func scGroup(e string) string {
	depth, alts := 0, false
	scOutside(e, func(_ int, c byte) bool {
		switch c {
		case '(':
			depth++
		case ')':
			depth--
		case '|':
			alts = depth == 0
		}
		return !alts
	})
	if alts {
		return "( " + e + " )"
	}
	return e
}

// scOpt is e, optional.
func scOpt(e string) string { return "( " + e + " )?" }

// scInQuotes is e between the quotes of a JSON string.
func scInQuotes(e string) string { return scSeq(`"\""`, e, `"\""`) }

// scTimes is item repeated lo to hi times in GBNF's notation (both at
// most 1000).
func scTimes(item string, lo, hi int64) string {
	item = scGroup(item)
	switch {
	case hi == 0:
		return ""
	case lo == 1 && hi == 1:
		return item
	case lo == 0 && hi == 1:
		return item + "?"
	case lo == hi:
		return fmt.Sprintf("%s{%d}", item, lo)
	}
	return fmt.Sprintf("%s{%d,%d}", item, lo, hi)
}

// scOutside calls f with each byte of GBNF text e (and its index) that
// is outside literals and character classes, until f returns false.
func scOutside(e string, f func(i int, c byte) bool) {
	inLit, inClass := false, false
	for i := 0; i < len(e); i++ {
		c := e[i]
		switch {
		case inLit || inClass:
			if c == '\\' {
				i++
			} else if inLit && c == '"' || inClass && c == ']' {
				inLit, inClass = false, false
			}
		case c == '"':
			inLit = true
		case c == '[':
			inClass = true
		default:
			if !f(i, c) {
				return
			}
		}
	}
}

// scExpansion adds up the repetition counts ({m,n}: n) in body.
func scExpansion(body string) int {
	n := 0
	scOutside(body, func(i int, c byte) bool {
		if c != '{' {
			return true
		}
		j := strings.IndexByte(body[i:], '}')
		if j < 0 {
			return false
		}
		m := 0
		for _, f := range strings.Split(body[i+1:i+j], ",") {
			if v, err := strconv.Atoi(strings.TrimSpace(f)); err == nil {
				m = max(m, v)
			}
		}
		n += m
		return true
	})
	return n
}

const scWS = `ws ::= ([ \t\n] [ \t]{0,20})?`

// The helper rules a grammar may use, in the order they are written.
var scHelpers = []struct{ name, body string }{
	{"integer", `"-"? ( "0" | [1-9] [0-9]* )`},
	{"boolean", `"true" | "false"`},
	{"char-nosur", `[^"\\\x00-\x1f] | "\\" ( ["\\/bfnrt] | "u" ( [0-9a-cA-Ce-fE-F] hex hex hex | [dD] [0-7] hex hex ) )`},
	{"key-char", `[^"\\\x00-\x1f] | "\\" ["\\bfnrt]`},
	{"nothing", `[^\x00-\U0010ffff]`},
	{"fmt-date", `[0-9]{4} "-" fmt-month-day | fmt-leap-year "-02-29"`},
	{"fmt-month-day", `( "01" | "03" | "05" | "07" | "08" | "10" | "12" ) "-" ( "0" [1-9] | [12] [0-9] | "3" [01] ) | ( "04" | "06" | "09" | "11" ) "-" ( "0" [1-9] | [12] [0-9] | "30" ) | "02-" ( "0" [1-9] | "1" [0-9] | "2" [0-8] )`},
	{"fmt-leap-year", `[0-9] [0-9] ( [02468] [48] | [13579] [26] | [2468] "0" ) | ( [02468] [048] | [13579] [26] ) "00"`},
	{"fmt-time", `( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{1,9} )? ( "Z" | [+-] ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] )`},
	{"fmt-date-time", `fmt-date "T" fmt-time`},
	{"fmt-uuid", `hex{8} "-" hex{4} "-" hex{4} "-" hex{4} "-" hex{12}`},
}

var scHelperDeps = map[string][]string{
	"fmt-date":      {"fmt-month-day", "fmt-leap-year"},
	"fmt-date-time": {"fmt-date", "fmt-time"},
}

// scReserved are names the grammar defines besides generated rules.
var scReserved = []string{"root", "value", "object", "member", "array", "string", "char", "hex", "number", "ws"}
