package server

import (
	"fmt"
	"strconv"
)

// Template nodes.
type (
	node     any
	textNode string
	outNode  struct{ e expr }
	ifNode   struct {
		conds  []expr
		bodies [][]node
		els    []node
	}
	forNode struct {
		vars      []string
		iter      expr
		filter    expr // "for x in xs if cond"
		body, els []node
	}
	setNode struct {
		name, attr string // attr: "set ns.attr = ..."
		e          expr
	}
)

// Expression nodes.
type (
	expr    any
	literal struct{ v any }
	varRef  string
	getAttr struct {
		x    expr
		name string
	}
	getItem  struct{ x, i expr }
	getSlice struct{ x, lo, hi expr } // nil bounds are open
	callExpr struct {
		fn     expr
		args   []expr
		kwargs map[string]expr
	}
	filterExpr struct {
		x      expr
		name   string
		args   []expr
		kwargs map[string]expr // map(attribute='x'), sort(reverse=true)
	}
	testExpr struct {
		x    expr
		name string
		neg  bool
		args []expr
	}
	binExpr struct {
		op   string
		l, r expr
	}
	notExpr  struct{ x expr }
	negExpr  struct{ x expr }
	condExpr struct{ then, cond, els expr }
	listExpr []expr
	// tupleExpr is a parenthesized list, "(a, b)": a list when evaluated,
	// and the arguments of "%" when it is written on its right.
	tupleExpr []expr
	dictExpr  struct{ keys, vals []expr }
)

type blockParser struct {
	segs  []segment
	pos   int
	depth int // blocks open, at most maxTemplateDepth
}

// parseTemplate builds the node tree of a lexed template.
func parseTemplate(segs []segment) ([]node, error) {
	p := &blockParser{segs: segs}
	body, end, err := p.block()
	if err != nil {
		return nil, err
	}
	if end != nil {
		return nil, fmt.Errorf("line %d: unexpected {%% %s %%}", end.line, end.toks[0].text)
	}
	return body, nil
}

// block parses nodes up to a statement that closes or continues the
// enclosing block (endif, elif, else, endfor), which it returns unconsumed
// in the sense that its tokens are left for the caller; nil at the end.
func (p *blockParser) block() ([]node, *segment, error) {
	if p.depth++; p.depth > maxTemplateDepth {
		line := 0
		if p.pos > 0 {
			line = p.segs[p.pos-1].line
		}
		return nil, nil, fmt.Errorf("line %d: blocks nested more than %d deep", line, maxTemplateDepth)
	}
	defer func() { p.depth-- }()
	var out []node
	for p.pos < len(p.segs) {
		s := &p.segs[p.pos]
		p.pos++
		switch s.kind {
		case 't':
			out = append(out, textNode(s.text))
		case 'o':
			e, err := parseWhole(s, s.toks)
			if err != nil {
				return nil, nil, err
			}
			out = append(out, outNode{e})
		case 's':
			if len(s.toks) == 0 || s.toks[0].kind != 'n' {
				return nil, nil, fmt.Errorf("line %d: empty or malformed statement", s.line)
			}
			switch kw := s.toks[0].text; kw {
			case "endif", "elif", "else", "endfor":
				return out, s, nil
			case "if":
				n, err := p.ifStmt(s)
				if err != nil {
					return nil, nil, err
				}
				out = append(out, n)
			case "for":
				n, err := p.forStmt(s)
				if err != nil {
					return nil, nil, err
				}
				out = append(out, n)
			case "set":
				n, err := setStmt(s)
				if err != nil {
					return nil, nil, err
				}
				out = append(out, n)
			default:
				return nil, nil, fmt.Errorf("line %d: unsupported statement %q", s.line, kw)
			}
		}
	}
	return out, nil, nil
}

func (p *blockParser) ifStmt(s *segment) (node, error) {
	n := &ifNode{}
	cur := s
	for {
		c, err := parseWhole(cur, cur.toks[1:])
		if err != nil {
			return nil, err
		}
		body, end, err := p.block()
		if err != nil {
			return nil, err
		}
		n.conds, n.bodies = append(n.conds, c), append(n.bodies, body)
		if end == nil {
			return nil, fmt.Errorf("line %d: {%% if %%} is not closed", s.line)
		}
		switch end.toks[0].text {
		case "elif":
			cur = end
			continue
		case "else":
			if n.els, end, err = p.block(); err != nil {
				return nil, err
			}
			if end == nil || end.toks[0].text != "endif" {
				return nil, fmt.Errorf("line %d: {%% if %%} is not closed", s.line)
			}
		case "endfor":
			return nil, fmt.Errorf("line %d: endfor inside an if opened on line %d", end.line, s.line)
		}
		return n, nil
	}
}

func (p *blockParser) forStmt(s *segment) (node, error) {
	ep := &exprParser{toks: s.toks[1:], line: s.line}
	n := &forNode{}
	for {
		t := ep.next()
		if t.kind != 'n' {
			return nil, fmt.Errorf("line %d: for: want a loop variable", s.line)
		}
		n.vars = append(n.vars, t.text)
		if !ep.accept("p", ",") {
			break
		}
	}
	if !ep.accept("n", "in") {
		return nil, fmt.Errorf("line %d: for: want \"in\"", s.line)
	}
	var err error
	// The iterable stops before "if": that starts a filter, not a ternary.
	if n.iter, err = ep.orExpr(); err != nil {
		return nil, err
	}
	if ep.accept("n", "if") {
		if n.filter, err = ep.expr(); err != nil {
			return nil, err
		}
	}
	if !ep.done() {
		return nil, fmt.Errorf("line %d: for: unexpected %q", s.line, ep.peek().text)
	}
	body, end, err := p.block()
	if err != nil {
		return nil, err
	}
	n.body = body
	if end != nil && end.toks[0].text == "else" {
		n.els, end, err = p.block()
		if err != nil {
			return nil, err
		}
	}
	if end == nil || end.toks[0].text != "endfor" {
		return nil, fmt.Errorf("line %d: {%% for %%} is not closed", s.line)
	}
	return n, nil
}

func setStmt(s *segment) (node, error) {
	ep := &exprParser{toks: s.toks[1:], line: s.line}
	t := ep.next()
	if t.kind != 'n' {
		return nil, fmt.Errorf("line %d: set: want a name", s.line)
	}
	n := &setNode{name: t.text}
	if ep.accept("p", ".") {
		a := ep.next()
		if a.kind != 'n' {
			return nil, fmt.Errorf("line %d: set: want an attribute name", s.line)
		}
		n.attr = a.text
	}
	if !ep.accept("p", "=") {
		return nil, fmt.Errorf("line %d: set: want \"=\" (block set is not supported)", s.line)
	}
	e, err := parseWhole(s, ep.toks[ep.pos:])
	if err != nil {
		return nil, err
	}
	n.e = e
	return n, nil
}

func parseWhole(s *segment, toks []token) (expr, error) {
	ep := &exprParser{toks: toks, line: s.line}
	e, err := ep.expr()
	if err != nil {
		return nil, err
	}
	if !ep.done() {
		return nil, fmt.Errorf("line %d: unexpected %q", s.line, ep.peek().text)
	}
	return e, nil
}

type exprParser struct {
	toks  []token
	pos   int
	line  int
	depth int // nesting, at most maxTemplateDepth
}

// nest enters one level of nesting; the caller leaves it (p.depth--).
func (p *exprParser) nest() error {
	if p.depth++; p.depth > maxTemplateDepth {
		return p.errf("expression nested more than %d deep", maxTemplateDepth)
	}
	return nil
}

func (p *exprParser) done() bool { return p.pos >= len(p.toks) }

func (p *exprParser) peek() token {
	if p.done() {
		return token{}
	}
	return p.toks[p.pos]
}

func (p *exprParser) next() token {
	t := p.peek()
	p.pos++
	return t
}

func (p *exprParser) is(kind, text string) bool {
	t := p.peek()
	return !p.done() && t.kind == kind[0] && t.text == text
}

func (p *exprParser) accept(kind, text string) bool {
	if p.is(kind, text) {
		p.pos++
		return true
	}
	return false
}

func (p *exprParser) errf(format string, args ...any) error {
	return fmt.Errorf("line %d: "+format, append([]any{p.line}, args...)...)
}

// expr: or-expression, optionally "A if C else B".
func (p *exprParser) expr() (expr, error) {
	if err := p.nest(); err != nil {
		return nil, err
	}
	defer func() { p.depth-- }()
	e, err := p.orExpr()
	if err != nil || !p.accept("n", "if") {
		return e, err
	}
	c, err := p.orExpr()
	if err != nil {
		return nil, err
	}
	var els expr = literal{undefined{}}
	if p.accept("n", "else") {
		if els, err = p.expr(); err != nil {
			return nil, err
		}
	}
	return condExpr{e, c, els}, nil
}

func (p *exprParser) orExpr() (expr, error) {
	return p.leftAssoc(p.andExpr, "n", "or")
}

func (p *exprParser) andExpr() (expr, error) {
	return p.leftAssoc(p.notExpr, "n", "and")
}

func (p *exprParser) leftAssoc(sub func() (expr, error), kind string, ops ...string) (expr, error) {
	l, err := sub()
	if err != nil {
		return nil, err
	}
	for {
		op := ""
		for _, o := range ops {
			if p.is(kind, o) {
				op = o
			}
		}
		if op == "" {
			return l, nil
		}
		p.pos++
		r, err := sub()
		if err != nil {
			return nil, err
		}
		l = binExpr{op, l, r}
	}
}

func (p *exprParser) notExpr() (expr, error) {
	if p.accept("n", "not") {
		if err := p.nest(); err != nil {
			return nil, err
		}
		defer func() { p.depth-- }()
		x, err := p.notExpr()
		return notExpr{x}, err
	}
	return p.compare()
}

func (p *exprParser) compare() (expr, error) {
	l, err := p.concat()
	if err != nil {
		return nil, err
	}
	for {
		switch {
		case p.is("n", "in"):
			p.pos++
			r, err := p.concat()
			if err != nil {
				return nil, err
			}
			l = binExpr{"in", l, r}
		case p.is("n", "not") && p.pos+1 < len(p.toks) && p.toks[p.pos+1].text == "in":
			p.pos += 2
			r, err := p.concat()
			if err != nil {
				return nil, err
			}
			l = notExpr{binExpr{"in", l, r}}
		case p.is("n", "is"):
			p.pos++
			neg := p.accept("n", "not")
			t := p.next()
			if t.kind != 'n' {
				return nil, p.errf("want a test name after \"is\"")
			}
			te := testExpr{x: l, name: t.text, neg: neg}
			if p.is("p", "(") {
				if te.args, _, err = p.args(); err != nil {
					return nil, err
				}
			} else if t := p.peek(); !p.done() && (t.kind == 's' || t.kind == 'i' || t.kind == 'f') {
				a, err := p.primary()
				if err != nil {
					return nil, err
				}
				te.args = []expr{a}
			}
			l = te
		default:
			t := p.peek()
			if p.done() || t.kind != 'p' {
				return l, nil
			}
			switch t.text {
			case "==", "!=", "<", ">", "<=", ">=":
				p.pos++
				r, err := p.concat()
				if err != nil {
					return nil, err
				}
				l = binExpr{t.text, l, r}
			default:
				return l, nil
			}
		}
	}
}

func (p *exprParser) concat() (expr, error) { return p.leftAssoc(p.additive, "p", "~") }
func (p *exprParser) additive() (expr, error) {
	return p.leftAssoc(p.multiplicative, "p", "+", "-")
}
func (p *exprParser) multiplicative() (expr, error) {
	return p.leftAssoc(p.unary, "p", "*", "/", "//", "%")
}

func (p *exprParser) unary() (expr, error) {
	if p.is("p", "-") || p.is("p", "+") {
		if err := p.nest(); err != nil {
			return nil, err
		}
		defer func() { p.depth-- }()
	}
	if p.accept("p", "-") {
		x, err := p.unary()
		return negExpr{x}, err
	}
	if p.accept("p", "+") {
		return p.unary()
	}
	return p.filtered()
}

func (p *exprParser) filtered() (expr, error) {
	x, err := p.postfix()
	if err != nil {
		return nil, err
	}
	for p.accept("p", "|") {
		t := p.next()
		if t.kind != 'n' {
			return nil, p.errf("want a filter name after \"|\"")
		}
		f := filterExpr{x: x, name: t.text}
		if p.is("p", "(") {
			if f.args, f.kwargs, err = p.args(); err != nil {
				return nil, err
			}
		}
		x = f
	}
	return x, nil
}

func (p *exprParser) postfix() (expr, error) {
	x, err := p.primary()
	if err != nil {
		return nil, err
	}
	for {
		switch {
		case p.accept("p", "."):
			t := p.next()
			if t.kind != 'n' && t.kind != 'i' {
				return nil, p.errf("want an attribute name after \".\"")
			}
			x = getAttr{x, t.text}
		case p.accept("p", "["):
			var lo, hi expr
			if !p.is("p", ":") {
				if lo, err = p.expr(); err != nil {
					return nil, err
				}
			}
			if p.accept("p", ":") {
				if !p.is("p", "]") {
					if hi, err = p.expr(); err != nil {
						return nil, err
					}
				}
				x = getSlice{x, lo, hi}
			} else {
				x = getItem{x, lo}
			}
			if !p.accept("p", "]") {
				return nil, p.errf("want \"]\"")
			}
		case p.is("p", "("):
			args, kw, err := p.args()
			if err != nil {
				return nil, err
			}
			x = callExpr{x, args, kw}
		default:
			return x, nil
		}
	}
}

// args parses "(a, b, k=v)".
func (p *exprParser) args() ([]expr, map[string]expr, error) {
	p.pos++ // "("
	var args []expr
	kw := map[string]expr{}
	for !p.accept("p", ")") {
		if p.done() {
			return nil, nil, p.errf("want \")\"")
		}
		if p.peek().kind == 'n' && p.pos+1 < len(p.toks) && p.toks[p.pos+1].text == "=" {
			name := p.next().text
			p.pos++
			v, err := p.expr()
			if err != nil {
				return nil, nil, err
			}
			kw[name] = v
		} else {
			v, err := p.expr()
			if err != nil {
				return nil, nil, err
			}
			args = append(args, v)
		}
		if !p.accept("p", ",") && !p.is("p", ")") {
			return nil, nil, p.errf("want \",\" or \")\" in arguments")
		}
	}
	return args, kw, nil
}

func (p *exprParser) primary() (expr, error) {
	if p.done() {
		return nil, p.errf("expression ends too soon")
	}
	t := p.next()
	switch t.kind {
	case 's':
		s := t.text
		for p.peek().kind == 's' { // adjacent literals concatenate
			s += p.next().text
		}
		return literal{s}, nil
	case 'i':
		v, err := strconv.Atoi(t.text)
		if err != nil {
			return nil, p.errf("bad integer %q", t.text)
		}
		return literal{v}, nil
	case 'f':
		v, _ := strconv.ParseFloat(t.text, 64)
		return literal{v}, nil
	case 'n':
		switch t.text {
		case "true", "True":
			return literal{true}, nil
		case "false", "False":
			return literal{false}, nil
		case "none", "None":
			return literal{nil}, nil
		}
		return varRef(t.text), nil
	}
	switch t.text {
	case "(":
		if p.accept("p", ")") {
			return tupleExpr{}, nil
		}
		e, err := p.expr()
		if err != nil {
			return nil, err
		}
		if p.accept("p", ")") {
			return e, nil
		}
		// A comma makes a tuple, as in Python: (a,) and (a, b).
		t := tupleExpr{e}
		for p.accept("p", ",") && !p.is("p", ")") {
			if e, err = p.expr(); err != nil {
				return nil, err
			}
			t = append(t, e)
		}
		if !p.accept("p", ")") {
			return nil, p.errf("want \")\"")
		}
		return t, nil
	case "[":
		var l listExpr
		for !p.accept("p", "]") {
			e, err := p.expr()
			if err != nil {
				return nil, err
			}
			l = append(l, e)
			if !p.accept("p", ",") && !p.is("p", "]") {
				return nil, p.errf("want \",\" or \"]\" in a list")
			}
		}
		return l, nil
	case "{":
		var d dictExpr
		for !p.accept("p", "}") {
			k, err := p.expr()
			if err != nil {
				return nil, err
			}
			if !p.accept("p", ":") {
				return nil, p.errf("want \":\" in a dict")
			}
			v, err := p.expr()
			if err != nil {
				return nil, err
			}
			d.keys, d.vals = append(d.keys, k), append(d.vals, v)
			if !p.accept("p", ",") && !p.is("p", "}") {
				return nil, p.errf("want \",\" or \"}\" in a dict")
			}
		}
		return d, nil
	}
	return nil, p.errf("unexpected %q", t.text)
}
