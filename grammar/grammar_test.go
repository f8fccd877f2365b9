package grammar

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

func mustParse(t testing.TB, src string) *Grammar {
	t.Helper()
	g, err := Parse(src)
	require.NoError(t, err, src)
	return g
}

// jsonCases are texts that encoding/json judges; the grammar must agree.
var jsonCases = []string{
	`{}`, `[]`, `0`, `-0`, `01`, `-`, `1.`, `1.5`, `.5`, `1e5`, `1E+5`, `1e-05`, `1e`, `-1.25e3`,
	`"a"`, `"\u00e9\n\t\"\\\/"`, `"\x"`, `"\u12"`, `"tab	in"`, `"é"`, `"💡"`, `""`,
	`true`, `false`, `null`, `nul`, `True`,
	` { "a" : [ 1 , 2 , { "b" : null } ] , "c" : "d" } `, `{"a":1,}`, `[1,]`, `[,1]`, `{"a"}`,
	`{"a":1 "b":2}`, `[[[[]]]]`, "[\r\n1\t]", `{"a":{"b":{"c":[true,false]}}}`, `1 2`, ``, ` `,
}

func TestJSONGrammarMatchesEncodingJSON(t *testing.T) {
	g := mustParse(t, jsonValue)
	for _, s := range jsonCases {
		require.Equal(t, json.Valid([]byte(s)), g.MatchString(s), "%q", s)
	}
	// Every prefix of a valid text can be continued; a text with a wrong
	// character cannot be, whatever follows.
	for _, s := range jsonCases {
		if json.Valid([]byte(s)) {
			for i := range len(s) {
				if utf8.ValidString(s[:i]) {
					require.True(t, g.Prefix(s[:i]), "prefix %q of %q", s[:i], s)
				}
			}
		}
	}
	for _, s := range []string{`{"a":1}}`, `[1]x`, `tru3`, `{1:2}`, `"\q`, `01`} {
		require.False(t, g.Prefix(s), "%q", s)
	}
	// The object grammar the server uses takes objects only.
	obj := mustParse(t, JSON)
	require.True(t, obj.MatchString(`{"a": [1, 2]}`))
	require.True(t, obj.MatchString("{\n  \"a\": 1\n}"))
	require.False(t, obj.MatchString(`[1]`))
	require.False(t, obj.MatchString(`"a"`))
}

func FuzzJSONGrammar(f *testing.F) {
	for _, s := range jsonCases {
		f.Add(s)
	}
	g := mustParse(f, jsonValue)
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) || len(s) > 200 {
			return // encoding/json takes invalid UTF-8 inside strings; the grammar reads characters
		}
		if got, want := g.MatchString(s), json.Valid([]byte(s)); got != want {
			t.Fatalf("%q: grammar %v, encoding/json %v", s, got, want)
		}
	})
}

// regexpCases pair grammars with the Go regular expressions that match the
// same texts.
var regexpCases = []struct{ gbnf, re string }{
	{`root ::= "ab" | "a" "c"*`, `ab|ac*`},
	{`root ::= [a-c]+ "x"?`, `[a-c]+x?`},
	{`root ::= [^a] [ab]{2}`, `[^a][ab]{2}`},
	{`root ::= ("a" | "bc"){1,3} "c"`, `(?:a|bc){1,3}c`},
	{`root ::= "ab"{2,} | "c"{,2}`, `(?:ab){2,}|c{0,2}`},
	{`root ::= x x
x ::= "a" | "b" x`, `b*ab*a`},
	{`root ::= . . "a"*`, `(?s)..a*`},
	{"# a comment\nroot ::= ( \"a\" # inside\n  | \"b\" ) \"c\" # and another\n", `(?:a|b)c`},
	{`root ::= [\x61-\x62] "\u0063" [\]\-]`, `[a-b]c[\]\-]`},
	{`root ::= "a"* "a"*`, `a*a*`},
	{`root ::= ("a" "b"?)* "b"`, `(?:ab?)*b`},
	{`root ::= [a-b]{0,3} [^a-b]{1}`, `[a-b]{0,3}[^a-b]`},
	{"root ::= \"a\nb\" [\n]{,2}", "a\nb\n{0,2}"}, // a raw newline in a literal, as llama.cpp reads it
}

func TestGrammarMatchesRegexp(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := []rune("abcx]-é")
	for _, c := range regexpCases {
		g := mustParse(t, c.gbnf)
		re := regexp.MustCompile(`^(?:` + c.re + `)$`)
		for range 3000 {
			var b strings.Builder
			for range r.IntN(8) {
				b.WriteRune(alphabet[r.IntN(len(alphabet))])
			}
			s := b.String()
			require.Equal(t, re.MatchString(s), g.MatchString(s), "%s on %q", c.re, s)
			// A prefix of a match is a prefix.
			if re.MatchString(s) {
				for i := range len(s) {
					if utf8.ValidString(s[:i]) {
						require.True(t, g.Prefix(s[:i]), "%s: prefix %q of %q", c.re, s[:i], s)
					}
				}
			}
		}
	}
}

func TestParseErrors(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		{`root ::= "a`, `line 1, column 12: unterminated string`},
		{`root ::= [a-`, `unterminated character class`},
		{`root ::= x`, `rule "x" is used but not defined`},
		{`x ::= "a"`, `no rule "root"`},
		{"root ::= \"a\"\nroot ::= \"b\"", `line 2, column 1: rule "root" is defined twice`},
		{`root ::= root "a"`, `rule "root" is left-recursive`},
		{"root ::= x\nx ::= \"a\"? root", `left-recursive`},
		{`root ::= ("a"?)* "b"`, `left-recursive`}, // a repetition of what can be empty
		{`root ::= "a" )`, `unexpected ")"`},
		{`root ::= ( "a"`, `want ) to close the group`},
		{`root ::= * "a"`, `repeats nothing`},
		{`root ::= "a"{3,1}`, `bounds backwards`},
		{`root ::= "a"{2`, `want } to close the repetition`},
		{`root ::= "a"{}`, `a repetition {} or {,} needs a count`},
		{`root ::= "a"{ , }`, `needs a count`},
		{`root ::= ` + strings.Repeat("(", 1001) + `"a"` + strings.Repeat(")", 1001), `groups nested more than 1000 deep`},
		{`root ::= ` + strings.Repeat(`"`+strings.Repeat("a", 50)+`"{1000} `, 21), `more than 1000000 elements in all`},
		{`root ::= "a"{5000}`, `too large`},
		{`root ::= "abcd"{1000}{1000}`, `a repetition of 4000000 elements`},
		{`root ::= [z-a]`, `backwards`},
		{`root ::= "\q"`, `unknown escape "\\q"`},
		{`root ::= "\x4"`, `bad \x escape`},
		{`root = "a"`, `want ::= after rule name "root"`},
		{`::= "a"`, `want a rule name`},
	} {
		_, err := Parse(c.src)
		require.Error(t, err, c.src)
		require.Contains(t, err.Error(), c.want, c.src)
		require.NotContains(t, err.Error(), "\n")
	}
}

// TestAllowedMatchesPrefix holds the trie walk to the grammar read text by
// text: token id is allowed after a text exactly when the text with the
// token's bytes is a prefix of a match (or, for an end token, the text is
// a match). Tokens split multi-byte characters, as byte tokens do.
func TestAllowedMatchesPrefix(t *testing.T) {
	pieces := [][]byte{nil, []byte("{"), []byte("}"), []byte(`"`), []byte(`":`), []byte("a"), []byte(`"a"`),
		[]byte(" "), []byte("\n"), []byte("1"), []byte("12"), []byte(`, "`), []byte("é"), []byte{0xc3}, []byte{0xa9},
		[]byte{0xe2, 0x82}, []byte{0xac}, []byte("tr"), []byte("ue"), []byte("true}"), []byte("[1,"), []byte{0xff}, []byte{0xe0}, []byte{0xf0}, []byte{0xf4, 0x90}, []byte{0xed, 0xa0}, []byte(`\`), []byte("n")}
	end := 0
	v := NewVocab(pieces, []int{end})
	g := mustParse(t, JSON)
	r := rand.New(rand.NewPCG(5, 5))
	mask := make([]bool, len(pieces))
	for walk := range 100 {
		m := g.NewMatcher(v)
		var text []byte
		for step := 0; step < 30; step++ {
			n := m.Allowed(mask)
			count := 0
			for id, p := range pieces {
				want := false
				switch {
				case id == end:
					want = g.MatchString(string(text)) && utf8.Valid(text)
				case len(p) > 0:
					want = bytePrefix(g, append(append([]byte(nil), text...), p...))
				}
				require.Equal(t, want, mask[id], "walk %d: after %q, token %q", walk, text, p)
				if want {
					count++
				}
			}
			require.Equal(t, count, n)
			var ok []int
			for id, a := range mask {
				if a {
					ok = append(ok, id)
				}
			}
			if len(ok) == 0 {
				break
			}
			id := ok[r.IntN(len(ok))]
			require.NoError(t, m.Accept(id))
			if id == end {
				break
			}
			text = append(text, pieces[id]...)
		}
	}
	m := g.NewMatcher(v)
	require.Error(t, m.Accept(2)) // "}" first
	require.Error(t, m.Accept(end))
	require.Error(t, m.Accept(len(pieces)))
}

// bytePrefix says whether b can be continued into a match: its whole
// characters are a prefix, and a cut character at its end can be
// completed into one that continues it.
func bytePrefix(g *Grammar, b []byte) bool {
	cut := len(b)
	for i := max(0, len(b)-3); i < len(b); i++ {
		if utf8.RuneStart(b[i]) && !utf8.FullRune(b[i:]) {
			cut = i
			break
		}
	}
	if !utf8.Valid(b[:cut]) {
		return false
	}
	if cut == len(b) {
		return g.Prefix(string(b))
	}
	// Complete the cut character with its smallest and its largest valid
	// completion: the grammars here treat every non-ASCII character alike,
	// so one of them fits exactly when some completion does.
	var find func(c []byte, up bool) []byte
	find = func(c []byte, up bool) []byte {
		if utf8.FullRune(c) {
			if utf8.Valid(c) {
				return c
			}
			return nil
		}
		for i := range 0x40 {
			x := byte(0x80 + i)
			if !up {
				x = byte(0xbf - i)
			}
			if r := find(append(append([]byte(nil), c...), x), up); r != nil {
				return r
			}
		}
		return nil
	}
	for _, up := range []bool{true, false} {
		if c := find(b[cut:], up); c != nil && g.Prefix(string(b[:cut])+string(c)) {
			return true
		}
	}
	return false
}

func TestAmbiguousGrammarStaysSmall(t *testing.T) {
	g := mustParse(t, `root ::= "a"* "a"* "a"* "b"`)
	require.True(t, g.MatchString(strings.Repeat("a", 200)+"b"))
	m := g.NewMatcher(NewVocab([][]byte{[]byte("a"), []byte("b")}, nil))
	for range 100 {
		require.NoError(t, m.Accept(0))
	}
	require.LessOrEqual(t, len(m.st.s), 4) // the next "a" of each repetition, or "b"
}

func ExampleParse() {
	g, err := Parse(`root ::= "yes" | "no"`)
	fmt.Println(err, g.MatchString("yes"), g.MatchString("maybe"))
	// Output: <nil> true false
}

// FuzzParse: any text is a grammar or a one-line error, never a panic or
// a matcher that loops.
func FuzzParse(f *testing.F) {
	for _, c := range regexpCases {
		f.Add(c.gbnf, "abc")
	}
	f.Add(JSON, `{"a": 1}`)
	f.Fuzz(func(t *testing.T, src, text string) {
		g, err := Parse(src)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error of more than one line: %q", err)
			}
			return
		}
		g.MatchString(text)
		g.Prefix(text)
	})
}
