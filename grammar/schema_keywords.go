package grammar

import (
	"math/big"
	"slices"
	"strings"
)

// The keywords: which kinds of value each applies to, which are not
// supported, and readers for the values of those the generator and the
// merging of schemas share.

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

// scKindNames are the kinds by their names in "type".
type scKindName struct {
	name string
	k    scKinds
}

var scKindNames = []scKindName{{"object", kObject}, {"array", kArray}, {"string", kString}, {"number", kNumber}, {"integer", kInteger}, {"boolean", kBoolean}, {"null", kNull}}

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

// scIsSchema refuses n unless it can be a schema: an object or a
// boolean.
func scIsSchema(n *jsonNode, path string) error {
	if n.kind != jsBool && n.kind != jsObject {
		return scErr(path, "a schema must be an object or a boolean, not %s", n.kindName())
	}
	return nil
}

// scRefuse refuses the unsupported keywords of s that apply to the kinds
// k exactly (0: those that apply to values of every kind).
func scRefuse(s *jsonNode, path string, k scKinds) error {
	for _, key := range s.keys {
		if scUnsupported[key] && scKindKeywords[key] == k {
			return scErr(path, "unsupported keyword %q", key)
		}
	}
	return nil
}

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
				i = slices.IndexFunc(scKindNames, func(x scKindName) bool { return x.name == n.s })
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

// scSplitKinds is the kinds in k, in scKindNames' order; integer is left
// out beside number, which takes integers.
func scSplitKinds(k scKinds) []scKindName {
	var out []scKindName
	for _, x := range scKindNames {
		if k&x.k != 0 && !(x.k == kInteger && k&kNumber != 0) {
			out = append(out, x)
		}
	}
	return out
}

func scTypeNode(k scKinds) *jsonNode {
	n := &jsonNode{kind: jsArray}
	for _, x := range scSplitKinds(k) {
		n.elems = append(n.elems, &jsonNode{kind: jsString, s: x.name})
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

// scValueKinds is the kind of each JSON value but numbers.
var scValueKinds = [...]scKinds{jsNull: kNull, jsBool: kBoolean, jsString: kString, jsArray: kArray, jsObject: kObject}

// scIsKind says whether value v is of one of the kinds.
func scIsKind(v *jsonNode, k scKinds) bool {
	if v.kind != jsNumber {
		return k&scValueKinds[v.kind] != 0
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

// scCounts reads a pair of count keywords (minLength and maxLength,
// minItems and maxItems): lo at least 0, hi -1 for no bound; given says
// whether either is there.
func scCounts(s *jsonNode, minK, maxK, path string) (lo, hi int64, given bool, err error) {
	if lo, err = scCount(s, minK, path); err != nil {
		return 0, 0, false, err
	}
	if hi, err = scCount(s, maxK, path); err != nil {
		return 0, 0, false, err
	}
	given = lo >= 0 || hi >= 0
	if hi == scHuge {
		hi = -1
	}
	return max(lo, 0), hi, given, nil
}

func scSchemaList(v *jsonNode, path string) ([]*jsonNode, error) {
	if v.kind != jsArray || len(v.elems) == 0 {
		return nil, scErr(path, "must be a non-empty list of schemas")
	}
	return v.elems, nil
}

// scProperties is the properties of s, nil when it has none.
func scProperties(s *jsonNode, path string) (*jsonNode, error) {
	p := s.get("properties")
	if p != nil && p.kind != jsObject {
		return nil, scErr(path+"/properties", "properties must be an object")
	}
	return p, nil
}

// scPrefixItems is the prefixItems of s (at path).
func scPrefixItems(s *jsonNode, path string) ([]*jsonNode, error) {
	p := s.get("prefixItems")
	if p == nil {
		return nil, nil
	}
	if p.kind != jsArray {
		return nil, scErr(path, "must be a list of schemas")
	}
	return p.elems, nil
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
