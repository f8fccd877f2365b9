package server

import (
	"fmt"
	"math"
	"strings"
)

// eval evaluates e; a value it builds (not one it looks up) is weighed
// against maxTemplateBytes.
func (r *renderer) eval(e expr) (any, error) {
	if err := r.step(); err != nil {
		return nil, err
	}
	v, err := r.eval1(e)
	if err != nil {
		return nil, err
	}
	switch e.(type) {
	case literal, varRef, getAttr, getItem:
		return v, nil
	}
	if err := weigh(v); err != nil {
		return nil, err
	}
	return v, nil
}

func (r *renderer) eval1(e expr) (any, error) {
	switch e := e.(type) {
	case literal:
		return e.v, nil
	case varRef:
		return r.lookup(string(e)), nil
	case getAttr:
		x, err := r.eval(e.x)
		if err != nil {
			return nil, err
		}
		return attribute(x, e.name), nil
	case getItem:
		x, err := r.eval(e.x)
		if err != nil {
			return nil, err
		}
		i, err := r.eval(e.i)
		if err != nil {
			return nil, err
		}
		return item(x, i), nil
	case getSlice:
		return r.slice(e)
	case callExpr:
		return r.call(e)
	case filterExpr:
		x, err := r.eval(e.x)
		if err != nil {
			return nil, err
		}
		args, err := r.evalAll(e.args)
		if err != nil {
			return nil, err
		}
		kw, err := r.evalKw(e.kwargs)
		if err != nil {
			return nil, err
		}
		return applyFilter(e.name, x, args, kw)
	case testExpr:
		x, err := r.eval(e.x)
		if err != nil {
			return nil, err
		}
		args, err := r.evalAll(e.args)
		if err != nil {
			return nil, err
		}
		ok, err := applyTest(e.name, x, args)
		return ok != e.neg, err
	case notExpr:
		x, err := r.eval(e.x)
		return !truthy(x), err
	case negExpr:
		x, err := r.eval(e.x)
		if err != nil {
			return nil, err
		}
		return arith("-", 0, x)
	case condExpr:
		c, err := r.eval(e.cond)
		if err != nil {
			return nil, err
		}
		if truthy(c) {
			return r.eval(e.then)
		}
		return r.eval(e.els)
	case binExpr:
		return r.binary(e)
	case listExpr:
		return r.evalAll(e)
	case tupleExpr:
		return r.evalAll(listExpr(e))
	case dictExpr:
		m := newDict(len(e.keys))
		for i := range e.keys {
			k, err := r.eval(e.keys[i])
			if err != nil {
				return nil, err
			}
			v, err := r.eval(e.vals[i])
			if err != nil {
				return nil, err
			}
			m.set(str(k), v)
		}
		return m, nil
	}
	return nil, fmt.Errorf("cannot evaluate %T", e)
}

func (r *renderer) evalAll(es []expr) ([]any, error) {
	out := make([]any, len(es))
	for i, e := range es {
		v, err := r.eval(e)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

func (r *renderer) evalKw(es map[string]expr) (map[string]any, error) {
	kw := map[string]any{}
	for k, e := range es {
		v, err := r.eval(e)
		if err != nil {
			return nil, err
		}
		kw[k] = v
	}
	return kw, nil
}

func (r *renderer) binary(e binExpr) (any, error) {
	l, err := r.eval(e.l)
	if err != nil {
		return nil, err
	}
	// and/or return an operand and short-circuit, as in Python.
	switch e.op {
	case "and":
		if !truthy(l) {
			return l, nil
		}
		return r.eval(e.r)
	case "or":
		if truthy(l) {
			return l, nil
		}
		return r.eval(e.r)
	}
	rv, err := r.eval(e.r)
	if err != nil {
		return nil, err
	}
	switch e.op {
	case "==":
		return equal(l, rv), nil
	case "!=":
		return !equal(l, rv), nil
	case "~":
		return str(l) + str(rv), nil
	case "in":
		return contains(rv, l)
	case "<", ">", "<=", ">=":
		return order(e.op, l, rv)
	case "%":
		// Python's printf-style formatting: a tuple written on the right
		// gives the arguments, any other value is one, and a mapping also
		// fills %(key)s.
		if f, ok := l.(string); ok {
			args := []any{rv}
			if _, tuple := e.r.(tupleExpr); tuple {
				args = rv.([]any)
			}
			d, _ := asDict(rv)
			return pyFormat(f, args, d)
		}
	case "+":
		if ls, ok := l.(string); ok {
			if rs, ok := rv.(string); ok {
				return ls + rs, nil
			}
		}
		if ll, ok := l.([]any); ok {
			if rl, ok := rv.([]any); ok {
				if len(ll)+len(rl) > maxTemplateItems {
					return nil, fmt.Errorf("a list of more than %d items", maxTemplateItems)
				}
				return append(append([]any{}, ll...), rl...), nil
			}
		}
	}
	return arith(e.op, l, rv)
}

func number(v any) (float64, bool) {
	switch v := v.(type) {
	case int:
		return float64(v), true
	case float64:
		return v, true
	case bool:
		if v {
			return 1, true
		}
		return 0, true
	}
	return 0, false
}

func arith(op string, l, r any) (any, error) {
	li, lInt := l.(int)
	ri, rInt := r.(int)
	lf, lok := number(l)
	rf, rok := number(r)
	if !lok || !rok {
		if ls, ok := l.(string); ok && op == "*" && rInt {
			if ri > 0 && len(ls) > 0 && ri > maxTemplateBytes/len(ls) {
				return nil, fmt.Errorf("a string of more than %d bytes", maxTemplateBytes)
			}
			return strings.Repeat(ls, max(ri, 0)), nil
		}
		return nil, fmt.Errorf("cannot apply %q to %s and %s", op, typeName(l), typeName(r))
	}
	if (op == "/" || op == "//" || op == "%") && rf == 0 {
		return nil, fmt.Errorf("division by zero")
	}
	if lInt && rInt {
		switch op {
		case "+":
			return li + ri, nil
		case "-":
			return li - ri, nil
		case "*":
			return li * ri, nil
		case "//":
			return int(math.Floor(float64(li) / float64(ri))), nil
		case "%":
			return ((li % ri) + ri) % ri, nil // Python's sign rule
		}
	}
	switch op {
	case "+":
		return lf + rf, nil
	case "-":
		return lf - rf, nil
	case "*":
		return lf * rf, nil
	case "/":
		return lf / rf, nil
	case "//":
		return math.Floor(lf / rf), nil
	case "%":
		return lf - rf*math.Floor(lf/rf), nil
	}
	return nil, fmt.Errorf("unknown operator %q", op)
}

func equal(a, b any) bool {
	if af, ok := number(a); ok {
		if bf, ok := number(b); ok {
			return af == bf
		}
	}
	switch a := a.(type) {
	case string:
		bs, ok := b.(string)
		return ok && a == bs
	case nil:
		return b == nil
	case undefined:
		_, ok := b.(undefined)
		return ok
	case []any:
		bl, ok := b.([]any)
		if !ok || len(a) != len(bl) {
			return false
		}
		for i := range a {
			if !equal(a[i], bl[i]) {
				return false
			}
		}
		return true
	case *dict:
		// As Python's dict ==, whatever the order: Mistral's template
		// compares messages.
		bd, ok := b.(*dict)
		if !ok || len(a.keys) != len(bd.keys) {
			return false
		}
		for k, v := range a.m {
			if w, ok := bd.m[k]; !ok || !equal(v, w) {
				return false
			}
		}
		return true
	}
	return false
}

func order(op string, l, r any) (bool, error) {
	c, err := compare(l, r)
	if err != nil {
		return false, err
	}
	switch op {
	case "<":
		return c < 0, nil
	case ">":
		return c > 0, nil
	case "<=":
		return c <= 0, nil
	}
	return c >= 0, nil
}

// compare orders two strings or two numbers as Python does (-1, 0, 1).
func compare(l, r any) (int, error) {
	if ls, ok := l.(string); ok {
		rs, ok := r.(string)
		if !ok {
			return 0, fmt.Errorf("cannot compare a string with %s", typeName(r))
		}
		return strings.Compare(ls, rs), nil
	}
	lf, lok := number(l)
	rf, rok := number(r)
	if !lok || !rok {
		return 0, fmt.Errorf("cannot compare %s with %s", typeName(l), typeName(r))
	}
	switch {
	case lf < rf:
		return -1, nil
	case lf > rf:
		return 1, nil
	}
	return 0, nil
}

func contains(container, x any) (bool, error) {
	switch c := container.(type) {
	case string:
		xs, ok := x.(string)
		if !ok {
			return false, fmt.Errorf("'in <string>' needs a string on the left, not %s", typeName(x))
		}
		return strings.Contains(c, xs), nil
	case []any:
		for _, v := range c {
			if equal(v, x) {
				return true, nil
			}
		}
		return false, nil
	case *dict:
		_, ok := c.m[str(x)]
		return ok, nil
	case namespace:
		_, ok := c[str(x)]
		return ok, nil
	case undefined, nil:
		return false, nil
	}
	return false, fmt.Errorf("\"in\" needs a container, not %s", typeName(container))
}

// attribute is x.name: a mapping's key, a loop property, else undefined.
func attribute(x any, name string) any {
	switch x := x.(type) {
	case *dict:
		if v, ok := x.m[name]; ok {
			return v
		}
	case namespace:
		if v, ok := x[name]; ok {
			return v
		}
	case *loopInfo:
		switch name {
		case "index":
			return x.index + 1
		case "index0":
			return x.index
		case "revindex":
			return x.length - x.index
		case "revindex0":
			return x.length - x.index - 1
		case "first":
			return x.index == 0
		case "last":
			return x.index == x.length-1
		case "length":
			return x.length
		case "previtem":
			return x.prev
		case "nextitem":
			return x.next
		}
	}
	return undefined{}
}

// item is x[i]: a mapping's key or a list's or string's element
// (negative indices count from the end), else undefined.
func item(x, i any) any {
	if s, ok := i.(string); ok {
		return attribute(x, s)
	}
	n, ok := i.(int)
	if !ok {
		return undefined{}
	}
	switch x := x.(type) {
	case []any:
		if n < 0 {
			n += len(x)
		}
		if n >= 0 && n < len(x) {
			return x[n]
		}
	case string:
		rs := []rune(x)
		if n < 0 {
			n += len(rs)
		}
		if n >= 0 && n < len(rs) {
			return string(rs[n])
		}
	}
	return undefined{}
}

func (r *renderer) slice(e getSlice) (any, error) {
	x, err := r.eval(e.x)
	if err != nil {
		return nil, err
	}
	bound := func(b expr, def, n int) (int, error) {
		if b == nil {
			return def, nil
		}
		v, err := r.eval(b)
		if err != nil {
			return 0, err
		}
		i, ok := v.(int)
		if !ok {
			return 0, fmt.Errorf("slice bounds must be integers, not %s", typeName(v))
		}
		if i < 0 {
			i += n
		}
		return min(max(i, 0), n), nil
	}
	var n int
	switch x := x.(type) {
	case []any:
		n = len(x)
	case string:
		n = len([]rune(x))
	default:
		return nil, fmt.Errorf("cannot slice %s", typeName(x))
	}
	lo, err := bound(e.lo, 0, n)
	if err != nil {
		return nil, err
	}
	hi, err := bound(e.hi, n, n)
	if err != nil {
		return nil, err
	}
	hi = max(hi, lo)
	if l, ok := x.([]any); ok {
		return l[lo:hi], nil
	}
	return string([]rune(x.(string))[lo:hi]), nil
}
