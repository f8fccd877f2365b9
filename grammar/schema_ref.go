package grammar

import (
	"net/url"
	"strconv"
	"strings"
)

// $ref: the JSON pointers into the schema, and the rule of each target,
// made once (a recursive schema refers back to it).

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
	body, err := g.refBody(target, tpath, name)
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

// refBody is the body of a $ref target (or of the root) for its rule,
// name: a $ref back to it before it reads a character is a loop.
func (g *schemaGen) refBody(target *jsonNode, tpath, name string) (string, error) {
	g.refs[target] = name
	g.open[target] = true
	g.enter = target
	body, err := g.body(target, tpath, name)
	delete(g.open, target)
	return body, err
}

// deref is what the $ref of s points at, and where that is; or, where
// keywords stand beside the $ref, that combined with them (merged), at
// path.
func (g *schemaGen) deref(s *jsonNode, path string) (n *jsonNode, where string, merged bool, err error) {
	target, tpath, err := g.resolve(s.get("$ref"), path+"/$ref")
	if err != nil {
		return nil, "", false, err
	}
	if rest := scWithout(s, "$ref"); scHasConstraints(rest) {
		n, err = g.conj(rest, target, path)
		return n, path, true, err
	}
	return target, tpath, false, nil
}
