package grammar

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"strconv"
	"strings"
)

// The schema as FromSchema reads it: JSON decoded with object members in
// their order (the order of properties is the order of the grammar's
// members, which encoding/json's maps lose), and written back as the
// compact JSON of enum and const values.

type jsonKind byte

const (
	jsNull jsonKind = iota
	jsBool
	jsNumber
	jsString
	jsArray
	jsObject
)

// jsonNode is a decoded JSON value; an object's members keep their order.
type jsonNode struct {
	kind  jsonKind
	b     bool
	s     string // a string, or a number's text
	elems []*jsonNode
	keys  []string
	vals  []*jsonNode
	index map[string]int // of keys, made for large objects
}

var scTrue = &jsonNode{kind: jsBool, b: true}
var scFalse = &jsonNode{kind: jsBool}

func (n *jsonNode) get(k string) *jsonNode {
	if n == nil || n.kind != jsObject {
		return nil
	}
	if len(n.keys) > 16 {
		if n.index == nil {
			n.index = make(map[string]int, len(n.keys))
			for i, kk := range n.keys {
				n.index[kk] = i
			}
		}
		if i, ok := n.index[k]; ok {
			return n.vals[i]
		}
		return nil
	}
	for i, kk := range n.keys {
		if kk == k {
			return n.vals[i]
		}
	}
	return nil
}

func (n *jsonNode) set(k string, v *jsonNode) {
	n.index = nil
	n.keys = append(n.keys, k)
	n.vals = append(n.vals, v)
}

func (n *jsonNode) kindName() string {
	return [...]string{"null", "a boolean", "a number", "a string", "an array", "an object"}[n.kind]
}

// text is n as compact JSON: members in their order, strings escaped
// only where JSON must be.
func (n *jsonNode) text() string {
	var b strings.Builder
	n.appendText(&b)
	return b.String()
}

func (n *jsonNode) appendText(b *strings.Builder) {
	switch n.kind {
	case jsNull:
		b.WriteString("null")
	case jsBool:
		b.WriteString(strconv.FormatBool(n.b))
	case jsNumber:
		b.WriteString(n.s)
	case jsString:
		scQuote(b, n.s)
	case jsArray:
		b.WriteByte('[')
		for i, e := range n.elems {
			if i > 0 {
				b.WriteByte(',')
			}
			e.appendText(b)
		}
		b.WriteByte(']')
	case jsObject:
		b.WriteByte('{')
		for i, k := range n.keys {
			if i > 0 {
				b.WriteByte(',')
			}
			scQuote(b, k)
			b.WriteByte(':')
			n.vals[i].appendText(b)
		}
		b.WriteByte('}')
	}
}

// scQuote writes s as a JSON string, each character one way: the short
// escapes where JSON has them, \u00XX for other control characters, the
// character itself otherwise.
func scQuote(b *strings.Builder, s string) {
	b.WriteByte('"')
	for _, r := range s {
		if e, ok := scShortEscape(r); ok {
			b.WriteByte('\\')
			b.WriteByte(e)
		} else if r < 0x20 {
			fmt.Fprintf(b, `\u%04x`, r)
		} else {
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
}

// scQuoted is k as a JSON string (quotes included), written one way.
func scQuoted(k string) string { return (&jsonNode{kind: jsString, s: k}).text() }

func scShortEscape(r rune) (byte, bool) {
	switch r {
	case '"':
		return '"', true
	case '\\':
		return '\\', true
	case '\b':
		return 'b', true
	case '\f':
		return 'f', true
	case '\n':
		return 'n', true
	case '\r':
		return 'r', true
	case '\t':
		return 't', true
	}
	return 0, false
}

const scMaxDepth = 256

func scDecode(src []byte) (*jsonNode, error) {
	d := json.NewDecoder(bytes.NewReader(src))
	d.UseNumber()
	n, err := scDecodeValue(d, "", 0)
	if err != nil {
		return nil, err
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, &SchemaError{Msg: "invalid JSON: more follows the schema"}
	}
	return n, nil
}

func scJSONErr(path string, err error) error {
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return scErr(path, "invalid JSON: unexpected end")
	}
	return scErr(path, "invalid JSON: %v", err)
}

func scDecodeValue(d *json.Decoder, path string, depth int) (*jsonNode, error) {
	t, err := d.Token()
	if err != nil {
		return nil, scJSONErr(path, err)
	}
	switch t := t.(type) {
	case json.Delim:
		if t != '{' && t != '[' {
			return nil, scErr(path, "invalid JSON: unexpected %q", rune(t))
		}
		if depth >= scMaxDepth {
			return nil, scErr(path, "nested more than %d deep", scMaxDepth)
		}
		n := &jsonNode{kind: jsArray}
		if t == '{' {
			n.kind = jsObject
			seen := map[string]bool{}
			for d.More() {
				kt, err := d.Token()
				if err != nil {
					return nil, scJSONErr(path, err)
				}
				k, ok := kt.(string)
				if !ok {
					return nil, scErr(path, "invalid JSON: a key that is not a string")
				}
				p := path + "/" + scPtrEsc(k)
				if seen[k] {
					return nil, scErr(p, "key given twice")
				}
				seen[k] = true
				v, err := scDecodeValue(d, p, depth+1)
				if err != nil {
					return nil, err
				}
				n.set(k, v)
			}
		} else {
			for d.More() {
				v, err := scDecodeValue(d, path+"/"+strconv.Itoa(len(n.elems)), depth+1)
				if err != nil {
					return nil, err
				}
				n.elems = append(n.elems, v)
			}
		}
		if _, err := d.Token(); err != nil { // the closing } or ]
			return nil, scJSONErr(path, err)
		}
		return n, nil
	case string:
		return &jsonNode{kind: jsString, s: t}, nil
	case json.Number:
		return &jsonNode{kind: jsNumber, s: string(t)}, nil
	case bool:
		return &jsonNode{kind: jsBool, b: t}, nil
	case nil:
		return &jsonNode{kind: jsNull}, nil
	}
	return nil, scErr(path, "invalid JSON")
}

func scPtrEsc(k string) string {
	return strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
}

// scRat is a JSON number's value, or nil when it is so long (past 400
// characters) or its exponent so large (past 400) that it is not worth
// the arithmetic.
func scRat(text string) *big.Rat {
	if len(text) > 400 {
		return nil
	}
	if i := strings.IndexAny(text, "eE"); i >= 0 {
		e, err := strconv.Atoi(strings.TrimPrefix(text[i+1:], "+"))
		if err != nil || e > 400 || e < -400 {
			return nil
		}
	}
	r, ok := new(big.Rat).SetString(text)
	if !ok {
		return nil
	}
	return r
}
