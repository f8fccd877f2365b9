package tokenizer

import (
	"fmt"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Byte-level BPE splits a text into words before merging, as llama.cpp's
// unicode_regex_split does: a pre-tokenizer is a list of regexes, each
// splitting every piece the ones before it left into its matches and the
// text between them. Go's regexp has no lookahead (GPT-2's \s+(?!\S)), so
// each regex is written out by hand here, with llama.cpp's semantics:
//
//   - \p{L}, \p{N}, \p{P} are Unicode's categories; \s is Unicode's
//     White_Space property (which, unlike JavaScript's \s, holds U+0085 and
//     not U+FEFF);
//   - in the regexes llama.cpp runs on its "collapsed" text (those with a
//     category in a bracket, such as Falcon's [\p{P}\$\+<=>\^~\|`]+), ASCII
//     characters keep their own class and the rest go by category;
//   - a byte that is not valid UTF-8 stays a byte of its own (llama.cpp turns
//     it into U+FFFD, losing it); it counts as a symbol, as U+FFFD would;
//   - Falcon's list ends as its tokenizer.json does, with steps that run on
//     the byte-level text (splitByteDigits), which llama.cpp's lacks.
//
// The words and ids of GPT-2's, Falcon's and Llama 3's are those of Hugging
// Face's tokenizers for their tokenizer.json (hf_ref_test.go).

// Character classes of a code point.
const (
	cLetter = 1 << iota
	cNumber
	cSpace
	cPunct // Unicode's P: llama.cpp's \p{P}
)

// cp is one code point (or invalid byte) of the text: its byte offset and class.
type cp struct {
	off int
	r   rune
	cls uint8
}

func classOf(r rune, invalid bool) uint8 {
	if invalid {
		return 0
	}
	if r < utf8.RuneSelf {
		switch {
		case 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z':
			return cLetter
		case '0' <= r && r <= '9':
			return cNumber
		case r == ' ' || '\t' <= r && r <= '\r':
			return cSpace
		}
		if unicode.IsPunct(r) {
			return cPunct
		}
		return 0
	}
	switch {
	case unicode.IsLetter(r):
		return cLetter
	case unicode.IsNumber(r):
		return cNumber
	case unicode.Is(unicode.White_Space, r):
		return cSpace
	case unicode.IsPunct(r):
		return cPunct
	}
	return 0
}

// codepoints decodes text, with a sentinel at len(text) closing the last one.
func codepoints(text string) []cp {
	cps := make([]cp, 0, len(text)+1)
	for i := 0; i < len(text); {
		r, n := utf8.DecodeRuneInString(text[i:])
		cps = append(cps, cp{off: i, r: r, cls: classOf(r, r == utf8.RuneError && n == 1)})
		i += n
	}
	return append(cps, cp{off: len(text), r: -1})
}

// span is a piece of the text as code point indices [a, b).
type span struct{ a, b int }

// splitter splits one span into consecutive, non-empty spans that cover it,
// appending them to out.
type splitter func(cps []cp, s span, out []span) []span

// preTokenizer is what tokenizer.ggml.pre names: llama.cpp's regex list,
// and whether a word that is a token whole skips the merges (Llama 3's).
type preTokenizer struct {
	steps []splitter
	// byteDigits: then split every word as Falcon's tokenizer.json does
	// after its ByteLevel step, on the bytes (splitByteDigits).
	byteDigits   bool
	ignoreMerges bool
	addBOS       bool // llama.cpp's default for tokenizer.ggml.add_bos_token
}

// gpt2Regex is GPT-2's: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
var gpt2Regex splitter = splitGPT2

// preTokenizers maps tokenizer.ggml.pre's values to llama.cpp's lists.
var preTokenizers = map[string]preTokenizer{
	// llama.cpp's default list, also for a file without tokenizer.ggml.pre:
	// [\p{P}\$\+<=>\^~\|]+, GPT-2's, \p{N}+, [0-9][0-9][0-9].
	"default": {steps: []splitter{punctRuns(false), gpt2Regex, runsOf(cNumber), digitTriples}},
	"gpt-2":   {steps: []splitter{gpt2Regex}},
	// Falcon's tokenizer.json: Punctuation (llama.cpp's [\p{P}\$\+<=>\^~\|`]+),
	// ByteLevel (GPT-2's regex), then on the bytes Digits and [0-9][0-9][0-9].
	"falcon": {steps: []splitter{punctRuns(true), gpt2Regex}, byteDigits: true},
	// Llama 3: (?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
	"llama-bpe": {steps: []splitter{splitLlama3}, ignoreMerges: true, addBOS: true},
}

// preAliases are the other names llama.cpp gives the same lists.
var preAliases = map[string]string{
	"":         "default",
	"gpt2":     "gpt-2",
	"phi-2":    "gpt-2",
	"llama3":   "llama-bpe",
	"llama-v3": "llama-bpe",
}

func lookupPre(name string) (preTokenizer, error) {
	if a, ok := preAliases[name]; ok {
		name = a
	}
	p, ok := preTokenizers[name]
	if !ok {
		var names []string
		for n := range preTokenizers {
			names = append(names, n)
		}
		for n := range preAliases {
			if n != "" {
				names = append(names, n)
			}
		}
		sort.Strings(names)
		return p, fmt.Errorf("pre-tokenizer %q is not supported (supported: %s)", name, strings.Join(names, ", "))
	}
	return p, nil
}

// split returns the words of text.
func (p preTokenizer) split(text string) []string {
	if text == "" {
		return nil
	}
	cps := codepoints(text)
	spans := []span{{0, len(cps) - 1}}
	var next []span
	for _, step := range p.steps {
		next = next[:0]
		for _, s := range spans {
			next = step(cps, s, next)
		}
		spans, next = next, spans
	}
	words := make([]string, 0, len(spans))
	for _, s := range spans {
		w := text[cps[s.a].off:cps[s.b].off]
		if p.byteDigits {
			words = splitByteDigits(w, words)
		} else {
			words = append(words, w)
		}
	}
	return words
}

// splitByteDigits appends the pieces of word as the steps after ByteLevel in
// Falcon's tokenizer.json split it. Those run on the word's byte-level text,
// one character a byte: Digits (individual_digits false) splits it into runs
// of numbers (Rust's char::is_numeric) and runs of the rest, so " 12" is
// " " and "12", and a UTF-8 character with a byte of numericByte is cut
// there ("ü", C3 BC, is C3 and BC); then [0-9][0-9][0-9] isolates ASCII
// digit triples. llama.cpp's list for Falcon lacks the Digits step; it gives
// the same ids with Falcon's own vocabulary, which has no merge across those
// cuts, but not with another.
func splitByteDigits(word string, out []string) []string {
	for i := 0; i < len(word); {
		j := i + 1
		for j < len(word) && numericByte[word[j]] == numericByte[word[i]] {
			j++
		}
		if !numericByte[word[i]] {
			out = append(out, word[i:j])
			i = j
			continue
		}
		prev := i
		for k := i; k+3 <= j; {
			if isASCIIDigit(word[k]) && isASCIIDigit(word[k+1]) && isASCIIDigit(word[k+2]) {
				if k > prev {
					out = append(out, word[prev:k])
				}
				out = append(out, word[k:k+3])
				k += 3
				prev = k
			} else {
				k++
			}
		}
		if prev < j {
			out = append(out, word[prev:j])
		}
		i = j
	}
	return out
}

func isASCIIDigit(b byte) bool { return '0' <= b && b <= '9' }

// matchSplit turns a matcher into a splitter the way llama.cpp applies a
// regex: every leftmost match is a piece, and so is the text between them.
// match returns the end of a match starting at i, or -1.
func matchSplit(match func(cps []cp, i, end int) int) splitter {
	return func(cps []cp, s span, out []span) []span {
		prev := s.a
		for i := s.a; i < s.b; {
			e := match(cps, i, s.b)
			if e < 0 {
				i++
				continue
			}
			if i > prev {
				out = append(out, span{prev, i})
			}
			out = append(out, span{i, e})
			i, prev = e, e
		}
		if prev < s.b {
			out = append(out, span{prev, s.b})
		}
		return out
	}
}

// punctRuns is [\p{P}\$\+<=>\^~\|]+ (with backtick, Falcon's): every ASCII
// punctuation or symbol character (the ASCII characters of \p{P} and the
// listed ones), and every other code point of category P.
func punctRuns(backtick bool) splitter {
	in := func(c cp) bool {
		if c.r >= 0 && c.r < utf8.RuneSelf && c.cls == 0 && c.r > ' ' && c.r < 0x7f {
			return c.r != '`' || backtick // $ + < = > ^ ` | ~ are the ASCII symbols
		}
		return c.cls == cPunct
	}
	return matchSplit(func(cps []cp, i, end int) int {
		j := i
		for j < end && in(cps[j]) {
			j++
		}
		if j == i {
			return -1
		}
		return j
	})
}

// runsOf is [class]+, e.g. \p{N}+.
func runsOf(cls uint8) splitter {
	return matchSplit(func(cps []cp, i, end int) int {
		j := i
		for j < end && cps[j].cls&cls != 0 {
			j++
		}
		if j == i {
			return -1
		}
		return j
	})
}

func isDigit(c cp) bool { return '0' <= c.r && c.r <= '9' }

// digitTriples is [0-9][0-9][0-9]: ASCII digits only.
var digitTriples = matchSplit(func(cps []cp, i, end int) int {
	if i+3 <= end && isDigit(cps[i]) && isDigit(cps[i+1]) && isDigit(cps[i+2]) {
		return i + 3
	}
	return -1
})

// splitGPT2 is GPT-2's regex, alternative by alternative (llama.cpp's
// unicode_regex_split_custom_gpt2 does the same): contractions
// (case-sensitive), an optional space and a run of letters, of numbers, or
// of anything else but whitespace; then whitespace, all of it but the last
// character when something follows (\s+(?!\S)), else all of it.
func splitGPT2(cps []cp, s span, out []span) []span {
	at := func(i int) cp {
		if i < s.b {
			return cps[i]
		}
		return cp{r: -1, cls: 0xff} // out of the span
	}
	other := func(c cp) bool { return c.cls != 0xff && c.cls&(cLetter|cNumber|cSpace) == 0 }
	for i := s.a; i < s.b; {
		start := i
		c := at(i)
		if n := contraction(cps, i, s.b, false); n > 0 {
			out = append(out, span{i, i + n})
			i += n
			continue
		}
		c2 := c
		if c.r == ' ' {
			c2 = at(i + 1)
		}
		switch {
		case c2.cls != 0xff && c2.cls&cLetter != 0:
			i = runFrom(cps, i, c.r == ' ', s.b, func(c cp) bool { return c.cls&cLetter != 0 })
		case c2.cls != 0xff && c2.cls&cNumber != 0:
			i = runFrom(cps, i, c.r == ' ', s.b, func(c cp) bool { return c.cls&cNumber != 0 })
		case other(c2):
			i = runFrom(cps, i, c.r == ' ', s.b, other)
		default:
			n := 0
			for i+n < s.b && cps[i+n].cls&cSpace != 0 {
				n++
			}
			switch {
			case n > 1 && i+n < s.b:
				i += n - 1
			case n > 0:
				i += n
			default:
				i++
			}
		}
		out = append(out, span{start, i})
	}
	return out
}

// runFrom skips the optional leading space, then the run of code points
// that in accepts, and returns where it ends.
func runFrom(cps []cp, i int, space bool, end int, in func(cp) bool) int {
	if space {
		i++
	}
	for i < end && in(cps[i]) {
		i++
	}
	return i
}

// contraction returns the length of 's 't 're 've 'm 'll 'd at i (any case
// when fold), or 0.
func contraction(cps []cp, i, end int, fold bool) int {
	if cps[i].r != '\'' || i+1 >= end {
		return 0
	}
	lower := func(r rune) rune {
		if fold && 'A' <= r && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return r
	}
	switch lower(cps[i+1].r) {
	case 's', 't', 'm', 'd':
		return 2
	}
	if i+2 < end {
		switch string([]rune{lower(cps[i+1].r), lower(cps[i+2].r)}) {
		case "re", "ve", "ll":
			return 3
		}
	}
	return 0
}

// splitLlama3 is Llama 3's regex, as llama.cpp's
// unicode_regex_split_custom_llama3 writes it out.
func splitLlama3(cps []cp, s span, out []span) []span {
	cls := func(i int) uint8 {
		if i < s.b {
			return cps[i].cls
		}
		return 0xff
	}
	isLetter := func(i int) bool { return cls(i) != 0xff && cls(i)&cLetter != 0 }
	isNumber := func(i int) bool { return cls(i) != 0xff && cls(i)&cNumber != 0 }
	isSpace := func(i int) bool { return cls(i) != 0xff && cls(i)&cSpace != 0 }
	isOther := func(i int) bool { return cls(i) != 0xff && cls(i)&(cLetter|cNumber|cSpace) == 0 }
	isCRLF := func(i int) bool { return i < s.b && (cps[i].r == '\r' || cps[i].r == '\n') }
	for i := s.a; i < s.b; {
		start := i
		r := cps[i].r
		if n := contraction(cps, i, s.b, true); n > 0 {
			out = append(out, span{i, i + n})
			i += n
			continue
		}
		// [^\r\n\p{L}\p{N}]?\p{L}+
		if !isCRLF(i) && !isNumber(i) && (isLetter(i) || isLetter(i+1)) {
			i++
			for isLetter(i) {
				i++
			}
			out = append(out, span{start, i})
			continue
		}
		// \p{N}{1,3}
		if isNumber(i) {
			for isNumber(i) {
				j := i
				for j < s.b && j-i < 3 && isNumber(j) {
					j++
				}
				out = append(out, span{i, j})
				i = j
			}
			continue
		}
		// ' '?[^\s\p{L}\p{N}]+[\r\n]*
		j := i
		if r == ' ' {
			j++
		}
		if isOther(j) {
			for isOther(j) {
				j++
			}
			for isCRLF(j) {
				j++
			}
			i = j
			out = append(out, span{start, i})
			continue
		}
		n, lastCRLF := 0, -1
		for isSpace(i + n) {
			if isCRLF(i + n) {
				lastCRLF = i + n + 1
			}
			n++
		}
		switch {
		case lastCRLF >= 0: // \s*[\r\n]+
			i = lastCRLF
		case n > 1 && i+n < s.b: // \s+(?!\S)
			i += n - 1
		case n > 0: // \s+
			i += n
		default:
			i++
		}
		out = append(out, span{start, i})
	}
	return out
}
