package grammar

import (
	"fmt"
	"strings"
)

// FromSchema's API and its last pass: the generator (schema_gen.go) writes
// the grammar, and the rules of the compiled grammar that can match
// nothing are found here, so that the generator can leave out the $refs
// that would strand a model.

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
		gr, err := scParse(text, "")
		if err != nil {
			return "", err
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

// scParse parses a grammar the generator wrote.
func scParse(text, path string) (*Grammar, error) {
	gr, err := Parse(text)
	if err != nil {
		return nil, scErr(path, "cannot make a grammar of the schema: %v", err)
	}
	return gr, nil
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
