package server

import (
	"fmt"
	"strings"
)

// A segment is a piece of template source: literal text, an output tag
// {{ }} or a statement tag {% %}, with its code already split into tokens.
type segment struct {
	kind byte // 't' text, 'o' output, 's' statement
	text string
	toks []token
	line int
}

type token struct {
	kind byte // 'n' name, 's' string, 'i' integer, 'f' float, 'p' punctuation
	text string
}

// lexTemplate splits src into segments, applying whitespace control as
// Hugging Face renders chat templates: trim_blocks and lstrip_blocks are on,
// and "-" beside a delimiter strips all whitespace on that side.
func lexTemplate(src string) ([]segment, error) {
	var segs []segment
	line := 1
	trimNext := false    // a "-" closed the last tag
	newlineNext := false // trim_blocks: drop one newline after a block tag
	i := 0
	for i < len(src) {
		j := nextTag(src, i)
		text := src[i:j]
		if trimNext {
			text = strings.TrimLeft(text, " \t\r\n")
		} else if newlineNext {
			text = strings.TrimPrefix(strings.TrimPrefix(text, "\r"), "\n")
		}
		trimNext, newlineNext = false, false
		line += strings.Count(src[i:j], "\n")
		if j == len(src) {
			segs = appendText(segs, text, line)
			break
		}
		open := src[j : j+2]
		k := j + 2
		switch {
		case k < len(src) && src[k] == '-':
			text = strings.TrimRight(text, " \t\r\n")
			k++
		case k < len(src) && src[k] == '+':
			k++ // "+" turns lstrip_blocks off for this tag
		case open != "{{":
			text = lstripBlock(src, i, j, text)
		}
		segs = appendText(segs, text, line)
		if open == "{#" {
			end := strings.Index(src[k:], "#}")
			if end < 0 {
				return nil, fmt.Errorf("line %d: comment is not closed", line)
			}
			body := src[k : k+end]
			trimNext = strings.HasSuffix(body, "-")
			newlineNext = !trimNext
			line += strings.Count(body, "\n")
			i = k + end + 2
			continue
		}
		closer := "}}"
		kind := byte('o')
		if open == "{%" {
			closer, kind = "%}", 's'
		}
		toks, n, strip, err := lexCode(src[k:], closer)
		if err != nil {
			return nil, fmt.Errorf("line %d: %v", line, err)
		}
		line += strings.Count(src[k:k+n], "\n")
		segs = append(segs, segment{kind: kind, toks: toks, line: line})
		trimNext = strip
		newlineNext = !strip && kind == 's'
		i = k + n
	}
	return segs, nil
}

func appendText(segs []segment, text string, line int) []segment {
	if text == "" {
		return segs
	}
	return append(segs, segment{kind: 't', text: text, line: line})
}

// nextTag is the index of the next "{{", "{%" or "{#" at or after i, or len(src).
func nextTag(src string, i int) int {
	for {
		k := strings.IndexByte(src[i:], '{')
		if k < 0 || i+k+1 >= len(src) {
			return len(src)
		}
		if c := src[i+k+1]; c == '{' || c == '%' || c == '#' {
			return i + k
		}
		i += k + 1
	}
}

// lstripBlock removes the spaces and tabs before a block tag at src[j] when
// nothing else precedes it on its source line; text is what is left of
// src[i:j] after earlier trimming, so it ends with the same bytes.
func lstripBlock(src string, i, j int, text string) string {
	k := j
	for k > i && (src[k-1] == ' ' || src[k-1] == '\t') {
		k--
	}
	if k > 0 && src[k-1] != '\n' {
		return text
	}
	return strings.TrimRight(text, " \t")
}

// lexCode tokenizes the code of a tag up to closer. It returns the tokens,
// the bytes consumed (closer included) and whether "-" preceded the closer.
// As in Jinja's lexer, the closer counts only outside brackets, so that
// {{ {"a": {"b": 1}} }} is one dict.
func lexCode(s, closer string) ([]token, int, bool, error) {
	var toks []token
	depth := 0
	i := 0
	for i < len(s) {
		c := s[i]
		switch {
		case depth == 0 && strings.HasPrefix(s[i:], closer):
			return toks, i + 2, false, nil
		case depth == 0 && c == '-' && strings.HasPrefix(s[i+1:], closer):
			return toks, i + 3, true, nil
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '"' || c == '\'':
			str, n, err := lexString(s[i:])
			if err != nil {
				return nil, 0, false, err
			}
			toks = append(toks, token{'s', str})
			i += n
		case isDigit(c):
			j := i
			for j < len(s) && isDigit(s[j]) {
				j++
			}
			kind := byte('i')
			if j+1 < len(s) && s[j] == '.' && isDigit(s[j+1]) {
				kind = 'f'
				for j++; j < len(s) && isDigit(s[j]); j++ {
				}
			}
			toks = append(toks, token{kind, s[i:j]})
			i = j
		case isNameStart(c):
			j := i
			for j < len(s) && (isNameStart(s[j]) || isDigit(s[j])) {
				j++
			}
			toks = append(toks, token{'n', s[i:j]})
			i = j
		default:
			op := ""
			for _, p := range []string{"==", "!=", "<=", ">=", "//", "**"} {
				if strings.HasPrefix(s[i:], p) {
					op = p
				}
			}
			if op == "" {
				if !strings.ContainsRune("+-*/%~|.,:()[]{}<>=", rune(c)) {
					return nil, 0, false, fmt.Errorf("unexpected character %q", c)
				}
				op = s[i : i+1]
			}
			switch op {
			case "(", "[", "{":
				depth++
			case ")", "]", "}":
				depth = max(depth-1, 0)
			}
			toks = append(toks, token{'p', op})
			i += len(op)
		}
	}
	return nil, 0, false, fmt.Errorf("tag is not closed by %q", closer)
}

func lexString(s string) (string, int, error) {
	q := s[0]
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		c := s[i]
		switch {
		case c == q:
			return b.String(), i + 1, nil
		case c == '\\' && i+1 < len(s):
			i++
			switch s[i] {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case 'r':
				b.WriteByte('\r')
			default: // \\, \', \" and anything else stand for themselves
				b.WriteByte(s[i])
			}
		default:
			b.WriteByte(c)
		}
	}
	return "", 0, fmt.Errorf("string is not closed")
}

func isDigit(c byte) bool     { return c >= '0' && c <= '9' }
func isNameStart(c byte) bool { return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
