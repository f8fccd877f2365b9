package grammar

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/url"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"
	"unicode"
)

// FromSchema turns a JSON Schema (the raw JSON bytes) into GBNF text whose
// root matches the JSON texts that the schema accepts, each written one
// way, as llama.cpp's json-schema-to-grammar and ollama's structured
// outputs do.
//
// A text the grammar matches is always one the schema accepts (the tests
// hold it to an independent validator), bar the approximations below; a
// text the schema accepts matches when it is written the grammar's way:
//
//   - Objects list their properties in the order the schema declares
//     them. Required ones must be there, optional ones may be left out.
//     With "additionalProperties": true or a schema, other properties
//     (not named in "properties") may follow the declared ones, each name
//     written one way (no \u escapes). When "additionalProperties" is
//     absent, an object with "properties" or "required" takes only those
//     (as llama.cpp's); one with neither takes any members.
//     "additionalProperties": false takes no others.
//   - Between tokens there is at most one newline and twenty blanks or
//     tabs (the rule ws), none before or after the root value, so that a
//     model cannot run on in whitespace for ever.
//   - enum and const values are written as compact JSON: object members
//     in the order the schema writes them, numbers as it writes them,
//     strings escaped only where JSON must be ("\n", not "\u000a").
//   - Integers have no fraction or exponent. Strings that must have a
//     length use no \u escape of a UTF-16 surrogate, and those of a
//     format or a pattern write the characters these constrain without
//     \u escapes.
//   - A schema without "type" takes the kinds its keywords are about
//     (properties make it an object, items an array, minLength a string,
//     and so on); with none of them, {} or true, it is any value.
//
// Supported: type (a name or a list), enum, const, properties, required,
// additionalProperties, items, prefixItems (and the older items-as-a-list
// with additionalItems), minItems, maxItems, minLength, maxLength, format
// (date, time, date-time and uuid are checked; other formats are
// annotations, as JSON Schema 2020-12 has them by default, and ignored),
// pattern (Go's regular expressions, which Go's validators use: ^ and $
// only at the ends; not with minLength, maxLength or format), minimum,
// maximum, exclusiveMinimum and exclusiveMaximum for integers, anyOf,
// oneOf, allOf, and $ref to "#" or a JSON pointer "#/..." into the schema
// itself ($defs, definitions; a recursive one is a rule of its own).
// Keywords beside $ref, anyOf or oneOf, and the schemas of allOf, are
// combined as JSON Schema combines them (properties with properties,
// bounds with bounds, enums intersected).
//
// Approximations: oneOf is read as anyOf, so a value that matches more
// than one of its branches is taken although the schema refuses it (its
// branches are usually of different types, or of different const
// discriminators, where the two are the same). minimum, maximum and their
// exclusive forms are not enforced for numbers that may have a fraction
// (type number), only for integers. Keywords JSON Schema does not know,
// and annotations (title, description, examples, default, $schema,
// $comment, ...), are ignored, as validators ignore them.
//
// Refused, with an error of one line (a *SchemaError) that names where in
// the schema, as a JSON pointer, the trouble is: unsupported keywords
// (not, if/then/else, patternProperties, propertyNames,
// min/maxProperties, dependentRequired, dependentSchemas, dependencies,
// contains, uniqueItems true, multipleOf, unevaluated*, $dynamicRef, $id
// below the root), $refs outside the schema or to anchors, a $ref loop
// that reads nothing, a schema that no value matches, malformed JSON or
// schemas, schemas nested more than 256 deep, more than 1000 optional
// properties in a row (the matcher follows at most 4096 readings of a
// text at once), and schemas whose grammar would be too large or deep
// (some megabytes, 200000 steps of work, merges within merges a thousand
// deep).
func FromSchema(schema []byte) (string, error) {
	doc, err := scDecode(schema)
	if err != nil {
		return "", err
	}
	sh := &scShared{budget: scMaxWork, never: map[*jsonNode]bool{}, enums: map[*jsonNode][]bool{}}
	// A $ref whose rule matches nothing (a recursion without an end)
	// would leave the model stranded where it could be chosen; such refs
	// are found on the compiled grammar and the grammar made again with
	// them left out.
	for pass := 0; ; pass++ {
		g := newSchemaGen(doc, sh)
		text, err := g.grammarText(doc, "")
		if err != nil {
			return "", err
		}
		if text == "" {
			return "", &SchemaError{Msg: "no JSON value matches the schema"}
		}
		gr, err := Parse(text)
		if err != nil {
			return "", &SchemaError{Msg: "cannot make a grammar of the schema: " + err.Error()}
		}
		live := scProductive(gr)
		if !live[gr.root] {
			return "", &SchemaError{Msg: "no JSON value matches the schema"}
		}
		byName := map[string]int{}
		for i, n := range gr.names {
			byName[n] = i
		}
		dead := false
		for node, name := range g.refs {
			if i, ok := byName[name]; ok && !live[i] && !sh.never[node] {
				sh.never[node], dead = true, true
			}
		}
		if !dead || pass >= 8 {
			return text, nil
		}
	}
}

// SchemaError is what FromSchema refuses: what is wrong or unsupported,
// and where, as a JSON pointer into the schema ("" is the whole of it).
type SchemaError struct {
	Pointer string
	Msg     string
}

func (e *SchemaError) Error() string {
	if e.Pointer == "" {
		return "json schema: " + scOneLine(e.Msg)
	}
	p := e.Pointer
	if len(p) > 200 {
		p = "..." + p[len(p)-200:]
	}
	return "json schema: " + scOneLine(p) + ": " + scOneLine(e.Msg)
}

func scErr(path, format string, a ...any) error {
	return &SchemaError{Pointer: path, Msg: fmt.Sprintf(format, a...)}
}

// scOneLine writes control characters (of property names, say) as \u
// escapes, so that an error is one line.
func scOneLine(s string) string {
	bad := func(r rune) bool { return r < 0x20 || r == 0x7f || r == 0x85 || r == 0x2028 || r == 0x2029 }
	if !strings.ContainsFunc(s, bad) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if bad(r) {
			fmt.Fprintf(&b, `\u%04x`, r)
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// ---- JSON, with object members kept in order ----

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

// ---- GBNF text ----

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
		return "( " + strings.Join(out, " | ") + " )?"
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
	depth, inLit, inClass := 0, false, false
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
		case c == '(':
			depth++
		case c == ')':
			depth--
		case c == '|' && depth == 0:
			return "( " + e + " )"
		}
	}
	return e
}

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

// ---- keywords ----

type scKinds uint8

const (
	kObject scKinds = 1 << iota
	kArray
	kString
	kNumber
	kInteger
	kBoolean
	kNull
	kAll = kObject | kArray | kString | kNumber | kInteger | kBoolean | kNull
)

var scKindNames = []struct {
	name string
	k    scKinds
}{{"object", kObject}, {"array", kArray}, {"string", kString}, {"number", kNumber}, {"integer", kInteger}, {"boolean", kBoolean}, {"null", kNull}}

// scKindKeywords are the keywords that apply to values of one kind.
var scKindKeywords = map[string]scKinds{
	"properties": kObject, "required": kObject, "additionalProperties": kObject, "patternProperties": kObject,
	"propertyNames": kObject, "minProperties": kObject, "maxProperties": kObject, "dependentRequired": kObject,
	"dependentSchemas": kObject, "dependencies": kObject, "unevaluatedProperties": kObject,
	"items": kArray, "prefixItems": kArray, "additionalItems": kArray, "minItems": kArray, "maxItems": kArray,
	"uniqueItems": kArray, "contains": kArray, "minContains": kArray, "maxContains": kArray, "unevaluatedItems": kArray,
	"minLength": kString, "maxLength": kString, "pattern": kString, "format": kString,
	"minimum": kNumber | kInteger, "maximum": kNumber | kInteger, "exclusiveMinimum": kNumber | kInteger,
	"exclusiveMaximum": kNumber | kInteger, "multipleOf": kNumber | kInteger,
}

// scGeneralKeywords apply to values of every kind.
var scGeneralKeywords = map[string]bool{
	"type": true, "enum": true, "const": true, "allOf": true, "anyOf": true, "oneOf": true, "not": true,
	"if": true, "then": true, "else": true, "$ref": true, "$dynamicRef": true, "$recursiveRef": true,
}

// scUnsupported are keywords that constrain values in ways the grammar
// does not follow.
var scUnsupported = map[string]bool{
	"not": true, "if": true, "then": true, "else": true, "$dynamicRef": true, "$recursiveRef": true,
	"patternProperties": true, "propertyNames": true, "minProperties": true, "maxProperties": true,
	"dependentRequired": true, "dependentSchemas": true, "dependencies": true, "unevaluatedProperties": true,
	"unevaluatedItems": true, "contains": true, "minContains": true, "maxContains": true, "multipleOf": true,
}

var scFormats = map[string]string{"date": "fmt-date", "time": "fmt-time", "date-time": "fmt-date-time", "uuid": "fmt-uuid"}

// scIsConstraint says whether keyword k can refuse a value (as opposed to
// annotations, containers like $defs, and keywords JSON Schema does not
// know, which validators ignore).
func scIsConstraint(k string) bool {
	_, ok := scKindKeywords[k]
	return ok || scGeneralKeywords[k]
}

func scHasConstraints(s *jsonNode) bool {
	if s.kind == jsBool {
		return !s.b
	}
	return slices.ContainsFunc(s.keys, scIsConstraint)
}

func scWithout(s *jsonNode, drop ...string) *jsonNode {
	out := &jsonNode{kind: jsObject}
	for i, k := range s.keys {
		if !slices.Contains(drop, k) {
			out.set(k, s.vals[i])
		}
	}
	return out
}

// scKindsOf is the kinds of value s may be: its type, or those its
// keywords apply to (all when none do). A number takes integers too.
func scKindsOf(s *jsonNode, path string) (scKinds, error) {
	var k scKinds
	if t := s.get("type"); t != nil {
		names := []*jsonNode{t}
		if t.kind == jsArray {
			names = t.elems
			if len(names) == 0 {
				return 0, scErr(path+"/type", "an empty list of types")
			}
		}
		for _, n := range names {
			i := -1
			if n.kind == jsString {
				i = slices.IndexFunc(scKindNames, func(x struct {
					name string
					k    scKinds
				}) bool {
					return x.name == n.s
				})
			}
			if i < 0 {
				return 0, scErr(path+"/type", "unknown type %s", n.text())
			}
			k |= scKindNames[i].k
		}
	} else {
		for i, key := range s.keys {
			if key == "format" && (s.vals[i].kind != jsString || scFormats[s.vals[i].s] == "") {
				continue // an annotation only
			}
			k |= scKindKeywords[key]
		}
		if k == 0 {
			k = kAll
		}
	}
	if k&kNumber != 0 {
		k |= kInteger
	}
	return k, nil
}

func scTypeNode(k scKinds) *jsonNode {
	n := &jsonNode{kind: jsArray}
	for _, x := range scKindNames {
		if k&x.k != 0 && !(x.k == kInteger && k&kNumber != 0) {
			n.elems = append(n.elems, &jsonNode{kind: jsString, s: x.name})
		}
	}
	return n
}

// scValues is s's enum and const together (the values in both, when it
// has both); ok is false when it has neither.
func scValues(s *jsonNode, path string) ([]*jsonNode, bool, error) {
	e, c := s.get("enum"), s.get("const")
	if e == nil && c == nil {
		return nil, false, nil
	}
	if e != nil && e.kind != jsArray {
		return nil, false, scErr(path+"/enum", "enum must be a list")
	}
	switch {
	case e == nil:
		return []*jsonNode{c}, true, nil
	case c == nil:
		return e.elems, true, nil
	}
	return scIntersect(e.elems, []*jsonNode{c}), true, nil
}

// scIntersect keeps the values of a that b has too (written alike).
func scIntersect(a, b []*jsonNode) []*jsonNode {
	in := map[string]bool{}
	for _, y := range b {
		in[y.text()] = true
	}
	var out []*jsonNode
	for _, x := range a {
		if in[x.text()] {
			out = append(out, x)
		}
	}
	return out
}

// scIsKind says whether value v is of one of the kinds.
func scIsKind(v *jsonNode, k scKinds) bool {
	switch v.kind {
	case jsNull:
		return k&kNull != 0
	case jsBool:
		return k&kBoolean != 0
	case jsString:
		return k&kString != 0
	case jsArray:
		return k&kArray != 0
	case jsObject:
		return k&kObject != 0
	}
	if k&kNumber != 0 {
		return true
	}
	if k&kInteger == 0 {
		return false
	}
	r := scRat(v.s)
	return r != nil && r.IsInt()
}

// scCount reads a count keyword (minLength, maxItems...): absent is -1,
// and one past 10^18 is scHuge.
func scCount(s *jsonNode, k, path string) (int64, error) {
	v := s.get(k)
	if v == nil {
		return -1, nil
	}
	if v.kind == jsNumber {
		if strings.HasPrefix(v.s, "-") {
			return 0, scErr(path+"/"+k, "%s must not be negative", k)
		}
		r := scRat(v.s)
		if r == nil {
			if strings.ContainsAny(v.s, ".-") {
				return 0, scErr(path+"/"+k, "%s is out of range", k)
			}
			return scHuge, nil // digits, and a large exponent
		}
		if !r.IsInt() {
			return 0, scErr(path+"/"+k, "%s must be an integer", k)
		}
		if r.Num().Cmp(big.NewInt(1e18)) > 0 {
			return scHuge, nil
		}
		return r.Num().Int64(), nil
	}
	return 0, scErr(path+"/"+k, "%s must be a non-negative integer, not %s", k, v.kindName())
}

// scHuge stands for counts past 10^18: as a bound above, none; below,
// more than any text can hold.
const scHuge = int64(1) << 62

func scSchemaList(v *jsonNode, path string) ([]*jsonNode, error) {
	if v.kind != jsArray || len(v.elems) == 0 {
		return nil, scErr(path, "must be a non-empty list of schemas")
	}
	return v.elems, nil
}

func scStrings(v *jsonNode, path string) ([]string, error) {
	if v == nil {
		return nil, nil
	}
	if v.kind != jsArray {
		return nil, scErr(path, "must be a list of strings")
	}
	var out []string
	seen := map[string]bool{}
	for _, e := range v.elems {
		if e.kind != jsString {
			return nil, scErr(path, "must be a list of strings")
		}
		if !seen[e.s] {
			seen[e.s] = true
			out = append(out, e.s)
		}
	}
	return out, nil
}

// ---- the generator ----

// Bounds on the work one schema may make: compile steps, and bytes of
// grammar.
const (
	scMaxWork = 200000
	scMaxSize = 8 << 20
)

type scShared struct {
	budget int
	size   int
	never  map[*jsonNode]bool   // $ref targets that match nothing
	enums  map[*jsonNode][]bool // which enum values pass a schema's other keywords
}

type schemaGen struct {
	doc     *jsonNode
	rules   []string
	taken   map[string]bool
	refs    map[*jsonNode]string // $ref targets' rules
	open    map[*jsonNode]bool   // $ref targets entered since the last character
	helpers map[string]bool
	powers  map[string][]string // item{10^j} rules, for counts past 1000
	suffix  map[string]int      // the last number unique put after a name
	enter   *jsonNode           // the node ref is about to compile
	depth   int                 // of body and conj calls
	sh      *scShared
}

func newSchemaGen(doc *jsonNode, sh *scShared) *schemaGen {
	g := &schemaGen{doc: doc, taken: map[string]bool{}, refs: map[*jsonNode]string{}, open: map[*jsonNode]bool{},
		helpers: map[string]bool{}, powers: map[string][]string{}, suffix: map[string]int{}, sh: sh}
	for _, n := range scReserved {
		g.taken[n] = true
	}
	for _, h := range scHelpers {
		g.taken[h.name] = true
	}
	return g
}

// scMaxNest bounds how deep body and conj call themselves.
const scMaxNest = 1000

func (g *schemaGen) spend(path string) error {
	if g.depth > scMaxNest {
		return scErr(path, "the schema nests too deeply to make a grammar of")
	}
	g.sh.budget--
	if g.sh.budget < 0 || g.sh.size > scMaxSize {
		return scErr(path, "the schema is too large or complex to make a grammar of")
	}
	return nil
}

// use marks a helper rule (and those it uses) for the grammar.
func (g *schemaGen) use(name string) string {
	g.helpers[name] = true
	for _, d := range scHelperDeps[name] {
		g.use(d)
	}
	return name
}

// unique is a rule name from hint that no rule has yet.
func (g *schemaGen) unique(hint string) string {
	var b strings.Builder
	dash := true
	for i := 0; i < len(hint) && b.Len() < 60; i++ {
		c := hint[i]
		if isNameByte(c) && c != '_' {
			b.WriteByte(c)
			dash = c == '-'
		} else if !dash {
			b.WriteByte('-')
			dash = true
		}
	}
	base := strings.Trim(b.String(), "-")
	if base == "" {
		base = "x"
	}
	name := base
	for g.taken[name] {
		g.suffix[base]++
		name = fmt.Sprintf("%s-%d", base, g.suffix[base]+1)
	}
	g.taken[name] = true
	return name
}

func (g *schemaGen) define(hint, body string) string {
	name := g.unique(hint)
	g.addRule(name, body)
	return name
}

func (g *schemaGen) addRule(name, body string) {
	r := name + " ::= " + body
	g.sh.size += len(r) + scRepeatCost*scExpansion(body)
	g.rules = append(g.rules, r)
}

// scRepeatCost is what a repetition count weighs against scMaxSize: the
// parser writes {m,n} out as n rules or copies.
const scRepeatCost = 64

// scExpansion adds up the repetition counts ({m,n}: n) in body.
func scExpansion(body string) int {
	n := 0
	inLit, inClass := false, false
	for i := 0; i < len(body); i++ {
		c := body[i]
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
		case c == '{':
			j := strings.IndexByte(body[i:], '}')
			if j < 0 {
				return n
			}
			m := 0
			for _, f := range strings.Split(body[i+1:i+j], ",") {
				if v, err := strconv.Atoi(strings.TrimSpace(f)); err == nil {
					m = max(m, v)
				}
			}
			n += m
			i += j
		}
	}
	return n
}

// inside is for what follows a character ({, [ or "): no $ref loop can
// pass it without reading one.
func (g *schemaGen) inside() func() {
	saved := g.open
	g.open = map[*jsonNode]bool{}
	return func() { g.open = saved }
}

// grammarText is the grammar whose root is schema s ("" when nothing
// matches it).
func (g *schemaGen) grammarText(s *jsonNode, path string) (string, error) {
	if s == g.doc {
		g.refs[s] = "root"
		g.open[s] = true
		g.enter = s
	}
	body, err := g.body(s, path, "root")
	delete(g.open, s)
	if err != nil || body == "" {
		return "", err
	}
	// The root comes after the rules it uses: GBNF's parser numbers rules
	// as they are first named, and finds which can be empty in passes over
	// them in that order, one pass for each rule named before one it uses.
	var b strings.Builder
	g.sh.size += scRepeatCost * scExpansion(body)
	for _, r := range g.rules {
		b.WriteString(r + "\n")
	}
	b.WriteString("root ::= " + body + "\n")
	for _, h := range scHelpers {
		if g.helpers[h.name] {
			b.WriteString(h.name + " ::= " + h.body + "\n")
		}
	}
	b.WriteString(strings.TrimPrefix(JSONRules, "\n"))
	b.WriteString(scWS + "\n")
	if g.sh.size+b.Len() > scMaxSize {
		return "", scErr(path, "the schema is too large or complex to make a grammar of")
	}
	return b.String(), nil
}

// compile is a GBNF expression (a rule name or a literal) for what schema
// s matches, "" when it matches nothing.
func (g *schemaGen) compile(s *jsonNode, path, hint string) (string, error) {
	b, err := g.body(s, path, hint)
	if err != nil || b == "" || scSimple(b) {
		return b, err
	}
	return g.define(hint, b), nil
}

// body is the right side of a rule for what schema s matches, "" when it
// matches nothing.
func (g *schemaGen) body(s *jsonNode, path, hint string) (string, error) {
	entered := g.enter == s
	g.enter = nil
	g.depth++
	defer func() { g.depth-- }()
	if err := g.spend(path); err != nil {
		return "", err
	}
	switch s.kind {
	case jsBool:
		if s.b {
			return "value", nil
		}
		return "", nil
	case jsObject:
	default:
		return "", scErr(path, "a schema must be an object or a boolean, not %s", s.kindName())
	}
	for _, k := range s.keys {
		if scUnsupported[k] && scKindKeywords[k] == 0 {
			return "", scErr(path, "unsupported keyword %q", k)
		}
	}
	if s != g.doc && s.get("$id") != nil {
		return "", scErr(path, `unsupported keyword "$id" below the root`)
	}
	if !entered && scMerges(s) {
		// A rule of its own, made once: a $ref beside other keywords may
		// refer to where it is, and would be merged without end.
		return g.ref(s, path)
	}
	if v := s.get("allOf"); v != nil {
		list, err := scSchemaList(v, path+"/allOf")
		if err != nil {
			return "", err
		}
		m := scWithout(s, "allOf")
		if len(list) == 1 && !scHasConstraints(m) {
			return g.body(list[0], path+"/allOf/0", hint)
		}
		for i, x := range list {
			if m, err = g.conj(m, x, path+"/allOf/"+strconv.Itoa(i)); err != nil {
				return "", err
			}
		}
		return g.body(m, path, hint)
	}
	if v := s.get("$ref"); v != nil {
		target, tpath, err := g.resolve(v, path+"/$ref")
		if err != nil {
			return "", err
		}
		rest := scWithout(s, "$ref")
		if scHasConstraints(rest) {
			m, err := g.conj(rest, target, path)
			if err != nil {
				return "", err
			}
			return g.body(m, path, hint)
		}
		return g.ref(target, tpath)
	}
	anyOf, oneOf := s.get("anyOf"), s.get("oneOf")
	if anyOf != nil || oneOf != nil {
		var list []*jsonNode
		var paths []string
		for _, kw := range []string{"anyOf", "oneOf"} {
			v := s.get(kw)
			if v == nil {
				continue
			}
			l, err := scSchemaList(v, path+"/"+kw)
			if err != nil {
				return "", err
			}
			if list == nil {
				list = l
				for i := range l {
					paths = append(paths, fmt.Sprintf("%s/%s/%d", path, kw, i))
				}
				continue
			}
			// Both: each pair of branches.
			var cross []*jsonNode
			var cpaths []string
			for i, a := range list {
				for j, b := range l {
					c, err := g.conj(a, b, fmt.Sprintf("%s/%s/%d", path, kw, j))
					if err != nil {
						return "", err
					}
					cross, cpaths = append(cross, c), append(cpaths, paths[i])
				}
			}
			list, paths = cross, cpaths
		}
		rest := scWithout(s, "anyOf", "oneOf")
		var alts []string
		for i, b := range list {
			if scHasConstraints(rest) {
				var err error
				if b, err = g.conj(rest, b, paths[i]); err != nil {
					return "", err
				}
			}
			e, err := g.compile(b, paths[i], hint+"-"+strconv.Itoa(i))
			if err != nil {
				return "", err
			}
			alts = append(alts, e)
		}
		if len(alts) > scManyAlts && !slices.ContainsFunc(alts, func(a string) bool { return a != "" && a[0] != '"' }) {
			// consts: read their common prefixes once
			var texts []string
			for _, a := range alts {
				if a != "" {
					texts = append(texts, scUnlit(a))
				}
			}
			return g.literals(texts, hint), nil
		}
		return scAlts(alts), nil
	}
	return g.plain(s, path, hint)
}

// resolve finds what a $ref points at: "#", or a JSON pointer "#/..."
// into the schema (or the same after the root's $id).
func (g *schemaGen) resolve(ref *jsonNode, path string) (*jsonNode, string, error) {
	if ref.kind != jsString {
		return nil, "", scErr(path, "$ref must be a string")
	}
	s := ref.s
	if id := g.doc.get("$id"); id != nil && id.kind == jsString {
		base, _, _ := strings.Cut(id.s, "#")
		if base != "" && strings.HasPrefix(s, base+"#") {
			s = s[len(base):]
		}
	}
	if !strings.HasPrefix(s, "#") {
		return nil, "", scErr(path, "unsupported $ref %q: only references into this schema (#/...) are supported", ref.s)
	}
	frag, err := url.PathUnescape(s[1:])
	if err != nil {
		return nil, "", scErr(path, "bad $ref %q", ref.s)
	}
	n, p := g.doc, ""
	if frag == "" {
		return n, p, nil
	}
	if frag[0] != '/' {
		return nil, "", scErr(path, "unsupported $ref %q: anchors are not supported, only JSON pointers", ref.s)
	}
	for _, tok := range strings.Split(frag[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		p += "/" + scPtrEsc(tok)
		var next *jsonNode
		switch n.kind {
		case jsObject:
			next = n.get(tok)
		case jsArray:
			if i, err := strconv.Atoi(tok); err == nil && i >= 0 && i < len(n.elems) && strconv.Itoa(i) == tok {
				next = n.elems[i]
			}
		}
		if next == nil {
			return nil, "", scErr(path, "$ref %q points at nothing", ref.s)
		}
		n = next
	}
	return n, p, nil
}

// ref is the rule for a $ref target, made the first time.
func (g *schemaGen) ref(target *jsonNode, tpath string) (string, error) {
	if g.sh.never[target] {
		return "", nil
	}
	if name, ok := g.refs[target]; ok {
		if g.open[target] {
			return "", scErr(tpath, "a $ref loop that reads nothing: the schema refers to itself before any value starts")
		}
		return name, nil
	}
	hint := tpath[strings.LastIndexByte(tpath, '/')+1:]
	if hint == "" {
		hint = "root"
	}
	name := g.unique(hint)
	g.refs[target] = name
	g.open[target] = true
	g.enter = target
	body, err := g.body(target, tpath, name)
	delete(g.open, target)
	if err != nil {
		return "", err
	}
	if body == "" {
		// Refs made while compiling it may have used the name.
		g.sh.never[target] = true
		g.addRule(name, g.use("nothing"))
		return "", nil
	}
	g.addRule(name, body)
	return name, nil
}

// scMerges says whether compiling s merges schemas: allOf, or $ref, anyOf
// or oneOf beside other keywords.
func scMerges(s *jsonNode) bool {
	if s.get("allOf") != nil {
		return true
	}
	for _, k := range []string{"$ref", "anyOf", "oneOf"} {
		if s.get(k) != nil && scHasConstraints(scWithout(s, k)) {
			return true
		}
	}
	return false
}

// plain is the body of a schema without allOf, $ref, anyOf or oneOf.
func (g *schemaGen) plain(s *jsonNode, path, hint string) (string, error) {
	kinds, err := scKindsOf(s, path)
	if err != nil {
		return "", err
	}
	vals, isEnum, err := scValues(s, path)
	if err != nil {
		return "", err
	}
	if isEnum {
		return g.enum(s, path, hint, kinds, vals)
	}
	if kinds == kAll && !slices.ContainsFunc(s.keys, func(k string) bool { return scKindKeywords[k] != 0 }) {
		return "value", nil
	}
	var parts []scKinds
	for _, x := range scKindNames {
		if kinds&x.k != 0 && !(x.k == kInteger && kinds&kNumber != 0) {
			parts = append(parts, x.k)
		}
	}
	var alts []string
	for _, k := range parts {
		name := scKindNames[slices.IndexFunc(scKindNames, func(x struct {
			name string
			k    scKinds
		}) bool {
			return x.k == k
		})].name
		h := hint
		if len(parts) > 1 {
			h = hint + "-" + name
		}
		var b string
		switch k {
		case kObject:
			b, err = g.object(s, path, h)
		case kArray:
			b, err = g.array(s, path, h)
		case kString:
			b, err = g.str(s, path, h)
		case kNumber:
			if s.get("multipleOf") != nil {
				return "", scErr(path, `unsupported keyword "multipleOf"`)
			}
			b = "number" // minimum and maximum are not enforced
		case kInteger:
			b, err = g.integer(s, path)
		case kBoolean:
			b = g.use("boolean")
		case kNull:
			b = `"null"`
		}
		if err != nil {
			return "", err
		}
		if b != "" && len(parts) > 1 && !scSimple(b) {
			b = g.define(h, b)
		}
		alts = append(alts, b)
	}
	return scAlts(alts), nil
}

// enum is the literals of the enum or const values that also pass the
// schema's other keywords.
func (g *schemaGen) enum(s *jsonNode, path, hint string, kinds scKinds, vals []*jsonNode) (string, error) {
	var texts []string
	seen := map[string]bool{}
	for _, v := range vals {
		if t := v.text(); scIsKind(v, kinds) && !seen[t] {
			seen[t] = true
			texts = append(texts, t)
		}
	}
	rest := scWithout(s, "enum", "const")
	if len(texts) > 0 && scHasConstraints(scWithout(rest, "type")) {
		// Keep the values that the grammar of the other keywords takes.
		ok, seen := g.sh.enums[s]
		if !seen {
			sub := newSchemaGen(g.doc, g.sh)
			text, err := sub.grammarText(rest, path)
			if err != nil {
				return "", err
			}
			ok = make([]bool, len(texts))
			if text != "" {
				gr, err := Parse(text)
				if err != nil {
					return "", scErr(path, "cannot make a grammar of the schema: %v", err)
				}
				for i, t := range texts {
					ok[i] = gr.MatchString(t)
				}
			}
			g.sh.enums[s] = ok
		}
		var kept []string
		for i, t := range texts {
			if ok[i] {
				kept = append(kept, t)
			}
		}
		texts = kept
	}
	return g.literals(texts, hint), nil
}

// scManyAlts is where literal alternatives start to share their
// prefixes: the matcher keeps one reading of each alternative that the
// text so far could be (at most 4096).
const scManyAlts = 32

// literals is the alternatives of the texts; many are written as a trie,
// so that those with a common prefix are one reading until they part.
func (g *schemaGen) literals(texts []string, hint string) string {
	if len(texts) <= scManyAlts {
		lits := make([]string, len(texts))
		for i, t := range texts {
			lits[i] = scLit(t)
		}
		return scAlts(lits)
	}
	type trie struct {
		end   bool
		next  map[rune]*trie
		order []rune
	}
	root := &trie{next: map[rune]*trie{}}
	for _, t := range texts {
		n := root
		for _, r := range t {
			c, ok := n.next[r]
			if !ok {
				c = &trie{next: map[rune]*trie{}}
				n.next[r] = c
				n.order = append(n.order, r)
			}
			n = c
		}
		n.end = true
	}
	var expr func(n *trie) string
	expr = func(n *trie) string {
		var alts []string
		for _, r := range n.order {
			run, c := []rune{r}, n.next[r]
			for !c.end && len(c.order) == 1 { // a run with no choice
				run = append(run, c.order[0])
				c = c.next[c.order[0]]
			}
			rest := ""
			if len(c.order) > 0 {
				rest = expr(c)
			}
			alts = append(alts, scSeq(scLit(string(run)), rest))
		}
		if n.end {
			alts = append(alts, "")
		}
		if len(alts) == 1 {
			return alts[0]
		}
		return g.define(hint+"-trie", scAlts(alts))
	}
	return expr(root)
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

// object is the body for objects of schema s.
func (g *schemaGen) object(s *jsonNode, path, hint string) (string, error) {
	for _, k := range s.keys {
		if scUnsupported[k] && scKindKeywords[k] == kObject {
			return "", scErr(path, "unsupported keyword %q", k)
		}
	}
	props := s.get("properties")
	if props != nil && props.kind != jsObject {
		return "", scErr(path+"/properties", "properties must be an object")
	}
	required, err := scStrings(s.get("required"), path+"/required")
	if err != nil {
		return "", err
	}
	ap := s.get("additionalProperties")
	if ap != nil && ap.kind != jsBool && ap.kind != jsObject {
		return "", scErr(path+"/additionalProperties", "a schema must be an object or a boolean, not %s", ap.kindName())
	}
	defer g.inside()()

	type member struct {
		key, expr string
		req       bool
	}
	var ms []member
	var names []string // every declared name: what other members may not be called
	isReq, declared := map[string]bool{}, map[string]bool{}
	for _, k := range required {
		isReq[k] = true
	}
	if props != nil {
		for i, k := range props.keys {
			names = append(names, k)
			declared[k] = true
			req := isReq[k]
			e, err := g.compile(props.vals[i], path+"/properties/"+scPtrEsc(k), hint+"-"+k)
			if err != nil {
				return "", err
			}
			if e == "" {
				if req {
					return "", nil
				}
				continue
			}
			ms = append(ms, member{k, e, req})
		}
	}
	// Required names that properties lack take additionalProperties'
	// schema.
	for _, k := range required {
		if declared[k] {
			continue
		}
		names = append(names, k)
		e := "value"
		if ap != nil {
			if e, err = g.compile(ap, path+"/additionalProperties", hint+"-"+k); err != nil {
				return "", err
			}
			if e == "" {
				return "", nil
			}
		}
		ms = append(ms, member{k, e, true})
	}
	extra := "" // the value of other members; "" none
	switch {
	case ap == nil:
		if props == nil && len(required) == 0 {
			extra = "value"
		}
	case ap.kind == jsBool:
		if ap.b {
			extra = "value"
		}
	default:
		if extra, err = g.compile(ap, path+"/additionalProperties", hint+"-additional"); err != nil {
			return "", err
		}
	}
	if len(ms) == 0 && extra == "" {
		return `"{" ws "}"`, nil
	}
	if len(ms) == 0 && extra == "value" {
		return "object", nil
	}

	extraMember, extraTail := "", ""
	if extra != "" {
		key := "string"
		if len(names) > 0 {
			key = g.keyNotIn(names, hint+"-key")
		}
		extraMember = g.define(hint+"-additional-kv", key+` ws ":" ws `+extra+" ws")
		extraTail = `( "," ws ` + extraMember + " )*"
	}
	kv := func(m member) string { return scLit(scQuoted(m.key)) + ` ws ":" ws ` + m.expr + " ws" }

	// The matcher keeps a reading for each member that may come next:
	// the optional ones up to the next required one.
	run := 0
	for _, m := range ms {
		if run++; m.req {
			run = 0
		}
		if run > scMaxOptional {
			return "", scErr(path+"/properties", "more than %d optional properties in a row: too many for the matcher to follow at once (make some required)", scMaxOptional)
		}
	}
	// tails[i]: the members from i on, after one has been written.
	firsts := 0 // how many members can come first: up to the first required one
	for firsts < len(ms) {
		firsts++
		if ms[firsts-1].req {
			break
		}
	}
	piece := func(i int) string {
		p := `"," ws ` + kv(ms[i])
		if !ms[i].req {
			p = "( " + p + " )?"
		}
		return p
	}
	tails := make([]string, len(ms)+1)
	if firsts > 0 {
		// After the last member that can come first, the rest is one
		// sequence.
		var flat []string
		for i := firsts; i < len(ms); i++ {
			flat = append(flat, piece(i))
		}
		tails[firsts] = scSeq(append(flat, extraTail)...)
	}
	for i := firsts; i >= 1; i-- {
		if i < firsts {
			tails[i] = scSeq(piece(i), tails[i+1])
		}
		if firsts > 1 && tails[i] != "" {
			tails[i] = g.define(hint+"-rest", tails[i]) // used twice: by a first member and the one before
		}
	}
	var alts []string
	for i := 0; i < firsts; i++ {
		alts = append(alts, scSeq(kv(ms[i]), tails[i+1]))
	}
	allOptional := !slices.ContainsFunc(ms, func(m member) bool { return m.req })
	if allOptional {
		if extraMember != "" {
			alts = append(alts, scSeq(extraMember, extraTail))
		}
		alts = append(alts, "")
	}
	return scSeq(`"{" ws`, scAlts(alts), `"}"`), nil
}

// scMaxOptional bounds a run of optional properties (see object).
const scMaxOptional = 1000

// scQuoted is k as a JSON string (quotes included), written one way.
func scQuoted(k string) string {
	var b strings.Builder
	scQuote(&b, k)
	return b.String()
}

// keyNotIn is a rule for JSON strings other than the names, each
// character written one way (no \u escapes, no \/), so that a name
// cannot come back in another spelling.
func (g *schemaGen) keyNotIn(names []string, hint string) string {
	type trie struct {
		end   bool
		next  map[rune]*trie
		order []rune
	}
	root := &trie{next: map[rune]*trie{}}
	for _, n := range names {
		t := root
		for _, r := range n {
			c, ok := t.next[r]
			if !ok {
				c = &trie{next: map[rune]*trie{}}
				t.next[r] = c
				t.order = append(t.order, r)
			}
			t = c
		}
		t.end = true
	}
	g.use("key-char")
	var rule func(t *trie) string
	rule = func(t *trie) string {
		var alts []string
		raw := `[^"\\\x00-\x1f`
		esc := []byte(`"\bfnrt`)
		for _, r := range t.order {
			var unit string
			switch e, short := scShortEscape(r); {
			case short:
				esc = slices.DeleteFunc(esc, func(c byte) bool { return c == e })
				unit = scLit(`\` + string(rune(e)))
			case r < 0x20:
				continue // only a \u escape writes it, which keys here do not use
			default:
				raw += scClassChar(r)
				unit = scLit(string(r))
			}
			alts = append(alts, scSeq(unit, rule(t.next[r])))
		}
		other := raw + "]"
		if len(t.order) == 0 {
			other = "key-char"
		} else if len(esc) > 0 {
			var cls strings.Builder
			for _, c := range esc {
				cls.WriteString(scClassChar(rune(c)))
			}
			other = "( " + other + ` | "\\" [` + cls.String() + "] )"
		}
		alts = append(alts, other+" key-char*")
		if !t.end {
			alts = append(alts, "")
		}
		return g.define(hint, scAlts(alts))
	}
	return g.define(hint, `"\"" `+rule(root)+` "\""`)
}

// scLegacyItems rewrites the older items-as-a-list (with additionalItems)
// as prefixItems (with items); additionalItems beside a schema items
// means nothing.
func scLegacyItems(s *jsonNode, path string) (*jsonNode, error) {
	it := s.get("items")
	if it != nil && it.kind == jsArray {
		if s.get("prefixItems") != nil {
			return nil, scErr(path, "both prefixItems and a list of items")
		}
		out := scWithout(s, "items", "additionalItems")
		out.set("prefixItems", it)
		if ai := s.get("additionalItems"); ai != nil {
			out.set("items", ai)
		}
		return out, nil
	}
	if s.get("additionalItems") != nil {
		return scWithout(s, "additionalItems"), nil
	}
	return s, nil
}

// array is the body for arrays of schema s.
func (g *schemaGen) array(s *jsonNode, path, hint string) (string, error) {
	for _, k := range s.keys {
		if scUnsupported[k] && scKindKeywords[k] == kArray {
			return "", scErr(path, "unsupported keyword %q", k)
		}
	}
	if u := s.get("uniqueItems"); u != nil && !(u.kind == jsBool && !u.b) {
		return "", scErr(path, `unsupported keyword "uniqueItems"`)
	}
	legacy := s.get("items") != nil && s.get("items").kind == jsArray
	s, err := scLegacyItems(s, path)
	if err != nil {
		return "", err
	}
	prefixPath, itemsPath := path+"/prefixItems", path+"/items"
	if legacy {
		prefixPath, itemsPath = path+"/items", path+"/additionalItems"
	}
	lo, err := scCount(s, "minItems", path)
	if err != nil {
		return "", err
	}
	hi, err := scCount(s, "maxItems", path)
	if err != nil {
		return "", err
	}
	lo = max(lo, 0)
	if hi == scHuge {
		hi = -1
	}
	var prefix []*jsonNode
	if p := s.get("prefixItems"); p != nil {
		if p.kind != jsArray {
			return "", scErr(prefixPath, "must be a list of schemas")
		}
		prefix = p.elems
	}
	defer g.inside()()
	var exprs []string // the schemas of the first elements
	for i, p := range prefix {
		if hi >= 0 && int64(i) >= hi {
			break
		}
		e, err := g.compile(p, fmt.Sprintf("%s/%d", prefixPath, i), fmt.Sprintf("%s-%d", hint, i))
		if err != nil {
			return "", err
		}
		if e == "" {
			hi = int64(i) // no element can be here, nor after
			break
		}
		exprs = append(exprs, e)
	}
	item := "value" // the schema of the rest
	if hi < 0 || int64(len(exprs)) < hi {
		if it := s.get("items"); it != nil {
			if item, err = g.compile(it, itemsPath, hint+"-item"); err != nil {
				return "", err
			}
		}
		if item == "" {
			hi = int64(len(exprs))
		}
	}
	if hi >= 0 && lo > hi {
		return "", nil
	}
	if hi == 0 {
		return `"[" ws "]"`, nil
	}
	if len(exprs) == 0 && item == "value" && lo == 0 && hi < 0 {
		return "array", nil
	}
	elem := func(i int) string {
		if i < len(exprs) {
			return exprs[i]
		}
		return item
	}
	// rest(i): the elements from i on, once i have been written.
	var rest func(i int) string
	rest = func(i int) string {
		if hi >= 0 && int64(i) >= hi {
			return ""
		}
		if i >= len(exprs) {
			one := g.define(hint+"-next", `"," ws `+item+" ws")
			return g.repeat(one, max(lo-int64(i), 0), hi-int64(i), hint+"-next")
		}
		piece := scSeq(`"," ws `+exprs[i]+" ws", rest(i+1))
		if int64(i) >= lo {
			piece = "( " + piece + " )?"
		}
		if i+1 < len(exprs) {
			piece = g.define(hint+"-rest", piece)
		}
		return piece
	}
	first := scSeq(elem(0)+" ws", rest(1))
	if lo == 0 {
		first = "( " + first + " )?"
	}
	return scSeq(`"[" ws`, first, `"]"`), nil
}

// repeat is item (a rule name) lo to hi times (hi < 0: no bound), without
// ambiguity; counts past 1000 (GBNF's bound) are made of rules for
// item{10^j}.
func (g *schemaGen) repeat(item string, lo, hi int64, hint string) string {
	var parts []string
	if lo > 0 {
		parts = append(parts, g.exactly(item, lo, hint))
	}
	switch {
	case hi < 0:
		parts = append(parts, item+"*")
	case hi > lo:
		parts = append(parts, g.upTo(item, hi-lo, hint))
	}
	return scSeq(parts...)
}

// power is the rule for item repeated 10^j times.
func (g *schemaGen) power(item string, j int, hint string) string {
	p := g.powers[item]
	if len(p) == 0 {
		p = []string{item}
	}
	for len(p) <= j {
		p = append(p, g.define(fmt.Sprintf("%s-x1e%d", hint, len(p)), scTimes(p[len(p)-1], 10, 10)))
	}
	g.powers[item] = p
	return p[j]
}

func (g *schemaGen) exactly(item string, n int64, hint string) string {
	if n <= 1000 {
		return scTimes(item, n, n)
	}
	ds := strconv.FormatInt(n, 10)
	var parts []string
	for i, c := range ds {
		d := int64(c - '0')
		parts = append(parts, scTimes(g.power(item, len(ds)-1-i, hint), d, d))
	}
	return scSeq(parts...)
}

// upTo is item 0 to m times: for m's decimal digits d (the power 10^p
// each), either d blocks of 10^p and at most the rest, or fewer blocks
// and any count under 10^p.
func (g *schemaGen) upTo(item string, m int64, hint string) string {
	if m <= 1000 {
		return scTimes(item, 0, m)
	}
	ds := strconv.FormatInt(m, 10)
	under := func(p int) string { // 0 to 10^p - 1 items
		var parts []string
		for j := p - 1; j >= 0; j-- {
			parts = append(parts, scTimes(g.power(item, j, hint), 0, 9))
		}
		return scSeq(parts...)
	}
	le := ""
	for i := len(ds) - 1; i >= 0; i-- {
		p, d := len(ds)-1-i, int64(ds[i]-'0')
		if d == 0 {
			continue // the same as what follows
		}
		u := g.power(item, p, hint)
		alts := []string{scSeq(scTimes(u, d, d), le), scSeq(scTimes(u, 0, d-1), under(p))}
		le = g.define(hint+"-upto", scAlts(alts))
	}
	return le
}

// str is the body for strings of schema s.
func (g *schemaGen) str(s *jsonNode, path, hint string) (string, error) {
	lo, err := scCount(s, "minLength", path)
	if err != nil {
		return "", err
	}
	hi, err := scCount(s, "maxLength", path)
	if err != nil {
		return "", err
	}
	format := ""
	if f := s.get("format"); f != nil && f.kind == jsString {
		format = scFormats[f.s]
	}
	if p := s.get("pattern"); p != nil {
		if format != "" || lo >= 0 || hi >= 0 {
			return "", scErr(path, "pattern together with format, minLength or maxLength is not supported")
		}
		if p.kind != jsString {
			return "", scErr(path+"/pattern", "pattern must be a string")
		}
		return g.pattern(p.s, path+"/pattern", hint)
	}
	if format != "" {
		if lo >= 0 || hi >= 0 {
			return "", scErr(path, "format %q together with minLength or maxLength is not supported", s.get("format").s)
		}
		return `"\"" ` + g.use(format) + ` "\""`, nil
	}
	lo = max(lo, 0)
	if hi == scHuge {
		hi = -1
	}
	if hi >= 0 && lo > hi {
		return "", nil
	}
	if lo == 0 && hi < 0 {
		return "string", nil
	}
	// A surrogate pair of \u escapes is one character to JSON Schema, so
	// counted strings leave them out.
	return scSeq(`"\""`, g.repeat(g.use("char-nosur"), lo, hi, hint+"-char"), `"\""`), nil
}

// integer is the body for integers of schema s, in its bounds.
func (g *schemaGen) integer(s *jsonNode, path string) (string, error) {
	if s.get("multipleOf") != nil {
		return "", scErr(path, `unsupported keyword "multipleOf"`)
	}
	var lo, hi *big.Int
	bound := func(k string, upper, strict bool) error {
		v := s.get(k)
		if v == nil || v.kind == jsBool {
			return nil
		}
		if v.kind != jsNumber {
			return scErr(path+"/"+k, "%s must be a number", k)
		}
		r := scRat(v.s)
		if r == nil {
			return scErr(path+"/"+k, "%s is out of range", k)
		}
		// floor, or the integer past it when strict and r is one
		n := new(big.Int).Div(r.Num(), r.Denom())
		if upper {
			if strict && r.IsInt() {
				n.Sub(n, big.NewInt(1))
			}
			if hi == nil || n.Cmp(hi) < 0 {
				hi = n
			}
			return nil
		}
		if !r.IsInt() || strict {
			n.Add(n, big.NewInt(1))
		}
		if lo == nil || n.Cmp(lo) > 0 {
			lo = n
		}
		return nil
	}
	isTrue := func(k string) bool { v := s.get(k); return v != nil && v.kind == jsBool && v.b }
	for _, b := range []struct {
		k             string
		upper, strict bool
	}{
		{"minimum", false, isTrue("exclusiveMinimum")},
		{"maximum", true, isTrue("exclusiveMaximum")},
		{"exclusiveMinimum", false, true},
		{"exclusiveMaximum", true, true},
	} {
		if err := bound(b.k, b.upper, b.strict); err != nil {
			return "", err
		}
	}
	if lo == nil && hi == nil {
		return g.use("integer"), nil
	}
	return scIntRange(lo, hi), nil
}

// scIntRange is the integers from lo to hi (nil: no bound) in decimal,
// without leading zeros.
func scIntRange(lo, hi *big.Int) string {
	zero, one := big.NewInt(0), big.NewInt(1)
	var alts []string
	if lo == nil || lo.Sign() < 0 {
		// -a to -b, for a >= b >= 1
		b := one
		if hi != nil && hi.Sign() < 0 {
			b = new(big.Int).Neg(hi)
		}
		var a *big.Int
		if lo != nil {
			a = new(big.Int).Neg(lo)
		}
		if n := scNatRange(b, a); n != "" {
			alts = append(alts, `"-" `+scGroup(n))
		}
	}
	if hi == nil || hi.Sign() >= 0 {
		a := zero
		if lo != nil && lo.Sign() > 0 {
			a = lo
		}
		if n := scNatRange(a, hi); n != "" {
			alts = append(alts, n)
		}
	}
	return scAlts(alts)
}

// scNatRange is the numbers from a >= 0 to b (nil: no bound).
func scNatRange(a, b *big.Int) string {
	if b != nil && a.Cmp(b) > 0 {
		return ""
	}
	as := a.String()
	nines := strings.Repeat("9", len(as))
	if b != nil {
		bs := b.String()
		if len(bs) == len(as) {
			return scSameLen(as, bs)
		}
		alts := []string{scSameLen(as, nines)}
		if len(bs)-2 >= len(as) { // the lengths between
			alts = append(alts, scSeq("[1-9]", scDigits(int64(len(as)), int64(len(bs)-2))))
		}
		alts = append(alts, scSameLen("1"+strings.Repeat("0", len(bs)-1), bs))
		return scAlts(alts)
	}
	longer := fmt.Sprintf("[1-9] [0-9]{%d,}", len(as))
	if len(as) == 1 {
		longer = "[1-9] [0-9]+"
	}
	return scAlts([]string{scSameLen(as, nines), longer})
}

func scDigits(lo, hi int64) string { return scTimes("[0-9]", lo, hi) }

// scSameLen is the numbers from x to y, both of the same length (and so
// either both 0-9 or both without a leading zero).
func scSameLen(x, y string) string {
	if x == "" {
		return ""
	}
	if x[0] == y[0] {
		return scSeq(scLit(x[:1]), scSameLen(x[1:], y[1:]))
	}
	n := int64(len(x) - 1)
	if strings.Trim(x[1:], "0") == "" && strings.Trim(y[1:], "9") == "" {
		return scSeq(fmt.Sprintf("[%c-%c]", x[0], y[0]), scDigits(n, n))
	}
	alts := []string{scSeq(scLit(x[:1]), scAtLeast(x[1:]))}
	if x[0]+1 <= y[0]-1 {
		alts = append(alts, scSeq(fmt.Sprintf("[%c-%c]", x[0]+1, y[0]-1), scDigits(n, n)))
	}
	alts = append(alts, scSeq(scLit(y[:1]), scAtMost(y[1:])))
	return scAlts(alts)
}

// scAtLeast is the digit strings of len(s) that are >= s.
func scAtLeast(s string) string {
	n := int64(len(s))
	if strings.Trim(s, "0") == "" {
		return scDigits(n, n)
	}
	alts := []string{scSeq(scLit(s[:1]), scAtLeast(s[1:]))}
	if s[0] < '9' {
		alts = append(alts, scSeq(fmt.Sprintf("[%c-9]", s[0]+1), scDigits(n-1, n-1)))
	}
	return scAlts(alts)
}

// scAtMost is the digit strings of len(s) that are <= s.
func scAtMost(s string) string {
	n := int64(len(s))
	if strings.Trim(s, "9") == "" {
		return scDigits(n, n)
	}
	alts := []string{scSeq(scLit(s[:1]), scAtMost(s[1:]))}
	if s[0] > '0' {
		alts = append(alts, scSeq(fmt.Sprintf("[0-%c]", s[0]-1), scDigits(n-1, n-1)))
	}
	return scAlts(alts)
}

// ---- combining schemas ----

var scObjGroup = []string{"properties", "additionalProperties", "patternProperties"}
var scArrGroup = []string{"prefixItems", "items"}

func scHasAny(s *jsonNode, keys []string) bool {
	return slices.ContainsFunc(keys, func(k string) bool { return s.get(k) != nil })
}

// inline replaces a $ref by what it points at (with the keywords beside
// it).
func (g *schemaGen) inline(s *jsonNode, path string) (*jsonNode, error) {
	for s.kind == jsObject && s.get("$ref") != nil {
		if err := g.spend(path); err != nil {
			return nil, err
		}
		target, _, err := g.resolve(s.get("$ref"), path+"/$ref")
		if err != nil {
			return nil, err
		}
		rest := scWithout(s, "$ref")
		if scHasConstraints(rest) {
			return g.conj(rest, target, path)
		}
		s = target
	}
	return s, nil
}

// conj is a schema that takes what both a and b take: for allOf, and for
// keywords beside $ref, anyOf or oneOf.
func (g *schemaGen) conj(a, b *jsonNode, path string) (*jsonNode, error) {
	g.depth++
	defer func() { g.depth-- }()
	if err := g.spend(path); err != nil {
		return nil, err
	}
	var err error
	if a, err = g.inline(a, path); err != nil {
		return nil, err
	}
	if b, err = g.inline(b, path); err != nil {
		return nil, err
	}
	for _, x := range []*jsonNode{a, b} {
		if x.kind != jsBool && x.kind != jsObject {
			return nil, scErr(path, "a schema must be an object or a boolean, not %s", x.kindName())
		}
	}
	switch {
	case a.kind == jsBool && a.b:
		return b, nil
	case b.kind == jsBool && b.b:
		return a, nil
	case a.kind == jsBool || b.kind == jsBool:
		return scFalse, nil
	}
	if a, err = scLegacyItems(a, path); err != nil {
		return nil, err
	}
	if b, err = scLegacyItems(b, path); err != nil {
		return nil, err
	}
	out := &jsonNode{kind: jsObject}
	keys := slices.Clone(a.keys)
	for _, k := range b.keys {
		if a.get(k) == nil {
			keys = append(keys, k)
		}
	}
	objBoth := scHasAny(a, scObjGroup) && scHasAny(b, scObjGroup)
	arrBoth := scHasAny(a, scArrGroup) && scHasAny(b, scArrGroup)
	objDone, arrDone, enumDone := false, false, false
	for _, k := range keys {
		if !scIsConstraint(k) {
			continue // annotations, $defs: $refs point into the document
		}
		av, bv := a.get(k), b.get(k)
		switch {
		case objBoth && slices.Contains(scObjGroup, k):
			if !objDone {
				objDone = true
				if err := g.conjObject(a, b, out, path); err != nil {
					return nil, err
				}
			}
			continue
		case arrBoth && slices.Contains(scArrGroup, k):
			if !arrDone {
				arrDone = true
				if err := g.conjArray(a, b, out, path); err != nil {
					return nil, err
				}
			}
			continue
		case k == "enum" || k == "const":
			if !enumDone {
				enumDone = true
				va, ha, err := scValues(a, path)
				if err != nil {
					return nil, err
				}
				vb, hb, err := scValues(b, path)
				if err != nil {
					return nil, err
				}
				switch {
				case !ha:
					va = vb
				case hb:
					va = scIntersect(va, vb)
				}
				out.set("enum", &jsonNode{kind: jsArray, elems: va})
			}
			continue
		case av == nil:
			out.set(k, bv)
			continue
		case bv == nil:
			out.set(k, av)
			continue
		}
		switch k {
		case "type":
			ka, err := scKindsOf(a, path)
			if err != nil {
				return nil, err
			}
			kb, err := scKindsOf(b, path)
			if err != nil {
				return nil, err
			}
			if ka&kb == 0 {
				return scFalse, nil
			}
			out.set("type", scTypeNode(ka&kb))
		case "required":
			ra, err := scStrings(av, path+"/required")
			if err != nil {
				return nil, err
			}
			rb, err := scStrings(bv, path+"/required")
			if err != nil {
				return nil, err
			}
			inA := map[string]bool{}
			for _, r := range ra {
				inA[r] = true
			}
			for _, r := range rb {
				if !inA[r] {
					ra = append(ra, r)
				}
			}
			n := &jsonNode{kind: jsArray}
			for _, r := range ra {
				n.elems = append(n.elems, &jsonNode{kind: jsString, s: r})
			}
			out.set(k, n)
		case "minLength", "minItems", "minimum", "exclusiveMinimum", "maxLength", "maxItems", "maximum", "exclusiveMaximum":
			if av.kind != jsNumber || bv.kind != jsNumber {
				if av.text() == bv.text() {
					out.set(k, av)
					continue
				}
				return nil, scErr(path, "cannot combine two different %q", k)
			}
			ra, rb := scRat(av.s), scRat(bv.s)
			if ra == nil || rb == nil {
				return nil, scErr(path, "%s is out of range", k)
			}
			c := ra.Cmp(rb)
			if strings.HasPrefix(k, "max") || k == "exclusiveMaximum" {
				c = -c
			}
			if c >= 0 {
				out.set(k, av)
			} else {
				out.set(k, bv)
			}
		case "allOf":
			la, err := scSchemaList(av, path+"/allOf")
			if err != nil {
				return nil, err
			}
			lb, err := scSchemaList(bv, path+"/allOf")
			if err != nil {
				return nil, err
			}
			out.set(k, &jsonNode{kind: jsArray, elems: append(slices.Clone(la), lb...)})
		case "anyOf", "oneOf":
			la, err := scSchemaList(av, path+"/"+k)
			if err != nil {
				return nil, err
			}
			lb, err := scSchemaList(bv, path+"/"+k)
			if err != nil {
				return nil, err
			}
			n := &jsonNode{kind: jsArray}
			for _, x := range la {
				for _, y := range lb {
					c, err := g.conj(x, y, path+"/"+k)
					if err != nil {
						return nil, err
					}
					n.elems = append(n.elems, c)
				}
			}
			out.set(k, n)
		default:
			if av.text() != bv.text() {
				return nil, scErr(path, "cannot combine two different %q (of allOf, or beside $ref, anyOf or oneOf)", k)
			}
			out.set(k, av)
		}
	}
	return out, nil
}

// conjObject combines properties and additionalProperties: a name
// declared on one side only meets the other side's additionalProperties.
func (g *schemaGen) conjObject(a, b, out *jsonNode, path string) error {
	if a.get("patternProperties") != nil || b.get("patternProperties") != nil {
		return scErr(path, `unsupported keyword "patternProperties"`)
	}
	pa, pb := a.get("properties"), b.get("properties")
	for _, p := range []*jsonNode{pa, pb} {
		if p != nil && p.kind != jsObject {
			return scErr(path+"/properties", "properties must be an object")
		}
	}
	apa, apb := a.get("additionalProperties"), b.get("additionalProperties")
	side := func(p, ap *jsonNode, k string) *jsonNode {
		if v := p.get(k); v != nil {
			return v
		}
		if ap != nil {
			return ap
		}
		return scTrue
	}
	orTrue := func(x *jsonNode) *jsonNode {
		if x == nil {
			return scTrue
		}
		return x
	}
	if pa != nil || pb != nil {
		props := &jsonNode{kind: jsObject}
		var keys []string
		if pa != nil {
			keys = slices.Clone(pa.keys)
		}
		if pb != nil {
			for _, k := range pb.keys {
				if pa.get(k) == nil {
					keys = append(keys, k)
				}
			}
		}
		for _, k := range keys {
			v, err := g.conj(side(pa, apa, k), side(pb, apb, k), path+"/properties/"+scPtrEsc(k))
			if err != nil {
				return err
			}
			props.set(k, v)
		}
		out.set("properties", props)
	}
	if apa != nil || apb != nil {
		v, err := g.conj(orTrue(apa), orTrue(apb), path+"/additionalProperties")
		if err != nil {
			return err
		}
		out.set("additionalProperties", v)
	}
	return nil
}

// conjArray combines prefixItems and items, element by element.
func (g *schemaGen) conjArray(a, b, out *jsonNode, path string) error {
	pa, pb := a.get("prefixItems"), b.get("prefixItems")
	for _, p := range []*jsonNode{pa, pb} {
		if p != nil && p.kind != jsArray {
			return scErr(path+"/prefixItems", "must be a list of schemas")
		}
	}
	ia, ib := a.get("items"), b.get("items")
	at := func(p, items *jsonNode, i int) *jsonNode {
		if p != nil && i < len(p.elems) {
			return p.elems[i]
		}
		if items != nil {
			return items
		}
		return scTrue
	}
	n := 0
	if pa != nil {
		n = len(pa.elems)
	}
	if pb != nil {
		n = max(n, len(pb.elems))
	}
	if n > 0 {
		pre := &jsonNode{kind: jsArray}
		for i := range n {
			v, err := g.conj(at(pa, ia, i), at(pb, ib, i), fmt.Sprintf("%s/prefixItems/%d", path, i))
			if err != nil {
				return err
			}
			pre.elems = append(pre.elems, v)
		}
		out.set("prefixItems", pre)
	}
	if ia != nil || ib != nil {
		v, err := g.conj(at(nil, ia, 0), at(nil, ib, 0), path+"/items")
		if err != nil {
			return err
		}
		out.set("items", v)
	}
	return nil
}

// scProductive says which rules match some text: a rule does when one of
// its alternatives has only characters that can be matched and rules
// that do. (A worklist: each alternative counts what it still waits on.)
func scProductive(g *Grammar) []bool {
	live := make([]bool, len(g.rules))
	type alt struct{ rule, alt int }
	var wait [][]int         // per rule and alternative, how many refs are not yet live
	users := map[int][]alt{} // rule -> the alternatives that use it
	var queue []int
	for r, alts := range g.rules {
		wait = append(wait, make([]int, len(alts)))
		for a, s := range alts {
			for _, e := range s {
				switch {
				case e.ref >= 0:
					wait[r][a]++
					users[e.ref] = append(users[e.ref], alt{r, a})
				case e.neg && covers(e.ranges, 0, 0x10ffff) || !e.neg && len(e.ranges) == 0:
					wait[r][a] = -1 << 30 // a character nothing matches: never
				}
			}
			if wait[r][a] == 0 && !live[r] {
				live[r] = true
				queue = append(queue, r)
			}
		}
	}
	for len(queue) > 0 {
		r := queue[0]
		queue = queue[1:]
		for _, u := range users[r] {
			wait[u.rule][u.alt]--
			if wait[u.rule][u.alt] == 0 && !live[u.rule] {
				live[u.rule] = true
				queue = append(queue, u.rule)
			}
		}
	}
	return live
}

// ---- pattern ----

// pattern is the body for strings that pattern (a regular expression, Go's
// syntax, which the validators of Go use too) matches somewhere in, as
// JSON Schema has it: "^" and "$" anchor it at the ends.
func (g *schemaGen) pattern(p, path, hint string) (string, error) {
	re, err := syntax.Parse(p, syntax.Perl)
	if err != nil {
		return "", scErr(path, "pattern %q: %v", p, err)
	}
	for re.Op == syntax.OpCapture {
		re = re.Sub[0]
	}
	branches := []*syntax.Regexp{re}
	if re.Op == syntax.OpAlternate {
		branches = re.Sub
	}
	var alts []string
	for _, b := range branches {
		for b.Op == syntax.OpCapture {
			b = b.Sub[0]
		}
		subs := []*syntax.Regexp{b}
		if b.Op == syntax.OpConcat {
			subs = b.Sub
		}
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
	return scSeq(`"\""`, g.define(hint+"-pattern", scAlts(alts)), `"\""`), nil
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
		out := scRe{never: true}
		var alts []string
		for _, s := range r.Sub {
			x, err := g.re(s, path)
			if err != nil {
				return scRe{}, err
			}
			if x.never {
				continue
			}
			out.never = false
			out.nullable = out.nullable || x.nullable
			alts = append(alts, x.e)
		}
		out.e = scAlts(alts)
		return out, nil
	case syntax.OpStar, syntax.OpPlus, syntax.OpQuest, syntax.OpRepeat:
		lo, hi := 0, -1
		switch r.Op {
		case syntax.OpPlus:
			lo = 1
		case syntax.OpQuest:
			hi = 1
		case syntax.OpRepeat:
			lo, hi = r.Min, r.Max
		}
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
		if len(alts) == 0 {
			return scRe{never: true}, nil
		}
		return scRe{e: scAlts(alts)}, nil
	case syntax.OpAlternate:
		var alts []string
		for _, s := range r.Sub {
			x, err := g.reNonEmpty(s, path)
			if err != nil {
				return scRe{}, err
			}
			if !x.never {
				alts = append(alts, x.e)
			}
		}
		if len(alts) == 0 {
			return scRe{never: true}, nil
		}
		return scRe{e: scAlts(alts)}, nil
	case syntax.OpStar, syntax.OpPlus, syntax.OpQuest, syntax.OpRepeat:
		hi := -1
		switch r.Op {
		case syntax.OpQuest:
			hi = 1
		case syntax.OpRepeat:
			hi = r.Max
		}
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
		var b strings.Builder
		for _, e := range esc {
			b.WriteString(scClassChar(rune(e)))
		}
		alts = append(alts, `"\\" [`+b.String()+"]")
	}
	return scAlts(alts)
}
