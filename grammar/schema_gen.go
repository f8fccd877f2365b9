package grammar

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// The generator: a schemaGen writes the rules of one grammar, a schema
// at a time (body), within a budget of work and size that all the
// generators of one FromSchema call share. The kinds of value have files
// of their own (schema_object.go, schema_array.go, ...).

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

const scTooLarge = "the schema is too large or complex to make a grammar of"

// scMaxNest bounds how deep body and conj call themselves.
const scMaxNest = 1000

func (g *schemaGen) spend(path string) error {
	if g.depth > scMaxNest {
		return scErr(path, "the schema nests too deeply to make a grammar of")
	}
	g.sh.budget--
	if g.sh.budget < 0 || g.sh.size > scMaxSize {
		return scErr(path, scTooLarge)
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
	var body string
	var err error
	if s == g.doc {
		body, err = g.refBody(s, path, "root")
	} else {
		body, err = g.body(s, path, "root")
	}
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
		return "", scErr(path, scTooLarge)
	}
	return b.String(), nil
}

// compile is a GBNF expression (a rule name or a literal) for what schema
// s matches, "" when it matches nothing.
func (g *schemaGen) compile(s *jsonNode, path, hint string) (string, error) {
	b, err := g.body(s, path, hint)
	if err != nil {
		return "", err
	}
	return g.named(b, hint), nil
}

// named is expression e where it can stand anywhere in a sequence (see
// scSimple), else a rule for it.
func (g *schemaGen) named(e, hint string) string {
	if e == "" || scSimple(e) {
		return e
	}
	return g.define(hint, e)
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
	if err := scIsSchema(s, path); err != nil {
		return "", err
	}
	if s.kind == jsBool {
		if s.b {
			return "value", nil
		}
		return "", nil
	}
	if err := scRefuse(s, path, 0); err != nil {
		return "", err
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
	if s.get("$ref") != nil {
		target, tpath, merged, err := g.deref(s, path)
		switch {
		case err != nil:
			return "", err
		case merged:
			return g.body(target, path, hint)
		}
		return g.ref(target, tpath)
	}
	if s.get("anyOf") != nil || s.get("oneOf") != nil {
		return g.branches(s, path, hint)
	}
	return g.plain(s, path, hint)
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
	parts := scSplitKinds(kinds)
	var alts []string
	for _, x := range parts {
		h := hint
		if len(parts) > 1 {
			h = hint + "-" + x.name
		}
		var b string
		switch x.k {
		case kObject:
			b, err = g.object(s, path, h)
		case kArray:
			b, err = g.array(s, path, h)
		case kString:
			b, err = g.str(s, path, h)
		case kNumber:
			err = scRefuse(s, path, kNumber|kInteger)
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
		if len(parts) > 1 {
			b = g.named(b, h)
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
			// The filter's generator goes on from this one's depth, so
			// that a $ref back to an enclosing schema cannot start
			// generators without end (a 60-byte schema ran out of memory).
			sub := newSchemaGen(g.doc, g.sh)
			sub.depth = g.depth
			text, err := sub.grammarText(rest, path)
			if err != nil {
				return "", err
			}
			ok = make([]bool, len(texts))
			if text != "" {
				gr, err := scParse(text, path)
				if err != nil {
					return "", err
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
