package grammar

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Combining schemas: allOf, and the keywords beside $ref, anyOf or oneOf,
// are merged into one schema that takes what all of them take; anyOf and
// oneOf are an alternative for each branch (branches), each merged with
// the keywords beside it.

// conj is a schema that takes what both a and b take: for allOf, and for
// keywords beside $ref, anyOf or oneOf.
func (g *schemaGen) conj(a, b *jsonNode, path string) (*jsonNode, error) {
	g.depth++
	defer func() { g.depth-- }()
	if err := g.spend(path); err != nil {
		return nil, err
	}
	a, b, err := scBoth(a, b, func(x *jsonNode) (*jsonNode, error) { return g.inline(x, path) })
	if err != nil {
		return nil, err
	}
	for _, x := range []*jsonNode{a, b} {
		if err := scIsSchema(x, path); err != nil {
			return nil, err
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
	if a, b, err = scBoth(a, b, func(x *jsonNode) (*jsonNode, error) { return scLegacyItems(x, path) }); err != nil {
		return nil, err
	}
	// Keywords merged as a group, at the first of them: enum with const,
	// and where both sides have some, properties with
	// additionalProperties, prefixItems with items.
	type group struct {
		keys  []string
		merge func(a, b, out *jsonNode, path string) error
		done  bool
	}
	groups := []*group{{keys: []string{"enum", "const"}, merge: scConjValues}}
	if scHasAny(a, scObjGroup) && scHasAny(b, scObjGroup) {
		groups = append(groups, &group{keys: scObjGroup, merge: g.conjObject})
	}
	if scHasAny(a, scArrGroup) && scHasAny(b, scArrGroup) {
		groups = append(groups, &group{keys: scArrGroup, merge: g.conjArray})
	}
	out := &jsonNode{kind: jsObject}
	for _, k := range scUnion(a.keys, b.keys) {
		if !scIsConstraint(k) {
			continue // annotations, $defs: $refs point into the document
		}
		if i := slices.IndexFunc(groups, func(gr *group) bool { return slices.Contains(gr.keys, k) }); i >= 0 {
			if gr := groups[i]; !gr.done {
				gr.done = true
				if err := gr.merge(a, b, out, path); err != nil {
					return nil, err
				}
			}
			continue
		}
		av, bv := a.get(k), b.get(k)
		switch {
		case av == nil:
			out.set(k, bv)
			continue
		case bv == nil:
			out.set(k, av)
			continue
		}
		switch k {
		case "type":
			ka, kb, err := scBoth(a, b, func(x *jsonNode) (scKinds, error) { return scKindsOf(x, path) })
			if err != nil {
				return nil, err
			}
			if ka&kb == 0 {
				return scFalse, nil
			}
			out.set("type", scTypeNode(ka&kb))
		case "required":
			ra, rb, err := scBoth(av, bv, func(x *jsonNode) ([]string, error) { return scStrings(x, path+"/required") })
			if err != nil {
				return nil, err
			}
			n := &jsonNode{kind: jsArray}
			for _, r := range scUnion(ra, rb) {
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
		case "allOf", "anyOf", "oneOf":
			la, lb, err := scBoth(av, bv, func(x *jsonNode) ([]*jsonNode, error) { return scSchemaList(x, path+"/"+k) })
			if err != nil {
				return nil, err
			}
			if k == "allOf" {
				out.set(k, &jsonNode{kind: jsArray, elems: append(slices.Clone(la), lb...)})
				continue
			}
			n, err := g.cross(la, lb, func(int) string { return path + "/" + k })
			if err != nil {
				return nil, err
			}
			out.set(k, &jsonNode{kind: jsArray, elems: n})
		default:
			if av.text() != bv.text() {
				return nil, scErr(path, "cannot combine two different %q (of allOf, or beside $ref, anyOf or oneOf)", k)
			}
			out.set(k, av)
		}
	}
	return out, nil
}

// inline replaces a $ref by what it points at (with the keywords beside
// it).
func (g *schemaGen) inline(s *jsonNode, path string) (*jsonNode, error) {
	for s.kind == jsObject && s.get("$ref") != nil {
		if err := g.spend(path); err != nil {
			return nil, err
		}
		target, _, merged, err := g.deref(s, path)
		if err != nil || merged {
			return target, err
		}
		s = target
	}
	return s, nil
}

// conjObject combines properties and additionalProperties: a name
// declared on one side only meets the other side's additionalProperties.
func (g *schemaGen) conjObject(a, b, out *jsonNode, path string) error {
	if a.get("patternProperties") != nil || b.get("patternProperties") != nil {
		return scErr(path, `unsupported keyword "patternProperties"`)
	}
	pa, pb, err := scBoth(a, b, func(x *jsonNode) (*jsonNode, error) { return scProperties(x, path) })
	if err != nil {
		return err
	}
	if pa != nil || pb != nil {
		apa, apb := a.get("additionalProperties"), b.get("additionalProperties")
		props := &jsonNode{kind: jsObject}
		var keys []string
		for _, p := range []*jsonNode{pa, pb} {
			if p != nil {
				keys = scUnion(keys, p.keys)
			}
		}
		for _, k := range keys {
			v, err := g.conj(scOr(pa.get(k), apa), scOr(pb.get(k), apb), path+"/properties/"+scPtrEsc(k))
			if err != nil {
				return err
			}
			props.set(k, v)
		}
		out.set("properties", props)
	}
	return g.conjKey(a, b, out, "additionalProperties", path)
}

// conjArray combines prefixItems and items, element by element.
func (g *schemaGen) conjArray(a, b, out *jsonNode, path string) error {
	pa, pb, err := scBoth(a, b, func(x *jsonNode) ([]*jsonNode, error) { return scPrefixItems(x, path+"/prefixItems") })
	if err != nil {
		return err
	}
	ia, ib := a.get("items"), b.get("items")
	at := func(p []*jsonNode, i int) *jsonNode { // element i of prefixItems p, if it has one
		if i < len(p) {
			return p[i]
		}
		return nil
	}
	if n := max(len(pa), len(pb)); n > 0 {
		pre := &jsonNode{kind: jsArray}
		for i := range n {
			v, err := g.conj(scOr(at(pa, i), ia), scOr(at(pb, i), ib), fmt.Sprintf("%s/prefixItems/%d", path, i))
			if err != nil {
				return err
			}
			pre.elems = append(pre.elems, v)
		}
		out.set("prefixItems", pre)
	}
	return g.conjKey(a, b, out, "items", path)
}

// conjKey sets keyword k (a schema) of out to one that takes what those
// of a and b take, where either has it.
func (g *schemaGen) conjKey(a, b, out *jsonNode, k, path string) error {
	x, y := a.get(k), b.get(k)
	if x == nil && y == nil {
		return nil
	}
	v, err := g.conj(scOr(x), scOr(y), path+"/"+k)
	if err != nil {
		return err
	}
	out.set(k, v)
	return nil
}

// scConjValues combines enum and const: the values that both a and b
// allow.
func scConjValues(a, b, out *jsonNode, path string) error {
	va, ha, err := scValues(a, path)
	if err != nil {
		return err
	}
	vb, hb, err := scValues(b, path)
	if err != nil {
		return err
	}
	switch {
	case !ha:
		va = vb
	case hb:
		va = scIntersect(va, vb)
	}
	out.set("enum", &jsonNode{kind: jsArray, elems: va})
	return nil
}

// branches is the body of a schema with anyOf or oneOf (oneOf read as
// anyOf): an alternative for each branch, or each pair of branches when
// it has both, merged with the keywords beside them.
func (g *schemaGen) branches(s *jsonNode, path, hint string) (string, error) {
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
		cross, err := g.cross(list, l, func(j int) string { return fmt.Sprintf("%s/%s/%d", path, kw, j) })
		if err != nil {
			return "", err
		}
		var cpaths []string
		for i := range cross {
			cpaths = append(cpaths, paths[i/len(l)])
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

// cross is, for each branch x of la and each y of lb in turn, a schema
// that takes what both take; path(j) is where lb's branch j is.
func (g *schemaGen) cross(la, lb []*jsonNode, path func(j int) string) ([]*jsonNode, error) {
	var out []*jsonNode
	for _, x := range la {
		for j, y := range lb {
			c, err := g.conj(x, y, path(j))
			if err != nil {
				return nil, err
			}
			out = append(out, c)
		}
	}
	return out, nil
}

// Keywords that conj merges together, where both sides have some.
var scObjGroup = []string{"properties", "additionalProperties", "patternProperties"}
var scArrGroup = []string{"prefixItems", "items"}

func scHasAny(s *jsonNode, keys []string) bool {
	return slices.ContainsFunc(keys, func(k string) bool { return s.get(k) != nil })
}

// scBoth reads a, then b, with read.
func scBoth[T any](a, b *jsonNode, read func(*jsonNode) (T, error)) (T, T, error) {
	x, err := read(a)
	if err != nil {
		return x, x, err
	}
	y, err := read(b)
	return x, y, err
}

// scUnion is a, then the strings of b that a lacks.
func scUnion(a, b []string) []string {
	out := slices.Clone(a)
	in := make(map[string]bool, len(a))
	for _, k := range a {
		in[k] = true
	}
	for _, k := range b {
		if !in[k] {
			in[k] = true
			out = append(out, k)
		}
	}
	return out
}

// scOr is the first of xs that is there, else true: the schema that takes
// anything, as an absent keyword does.
func scOr(xs ...*jsonNode) *jsonNode {
	for _, x := range xs {
		if x != nil {
			return x
		}
	}
	return scTrue
}
