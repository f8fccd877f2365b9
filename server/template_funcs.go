package server

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
	"unicode"
)

// call runs a global function (raise_exception, range, namespace) or a
// method of a string or mapping.
func (r *renderer) call(e callExpr) (any, error) {
	args, err := r.evalAll(e.args)
	if err != nil {
		return nil, err
	}
	kw := map[string]any{}
	for k, ke := range e.kwargs {
		if kw[k], err = r.eval(ke); err != nil {
			return nil, err
		}
	}
	if m, ok := e.fn.(getAttr); ok {
		x, err := r.eval(m.x)
		if err != nil {
			return nil, err
		}
		return method(x, m.name, args)
	}
	name, ok := e.fn.(varRef)
	if !ok {
		return nil, fmt.Errorf("only named functions and methods can be called")
	}
	switch name {
	case "raise_exception":
		msg := "raise_exception"
		if len(args) > 0 {
			msg = str(args[0])
		}
		return nil, &raised{msg}
	case "namespace":
		ns := namespace{}
		for k, v := range kw {
			ns[k] = v
		}
		return ns, nil
	case "range":
		return rangeOf(args)
	}
	return nil, fmt.Errorf("unknown function %s()", name)
}

func rangeOf(args []any) (any, error) {
	var b [3]int
	b[2] = 1
	for i, a := range args {
		n, ok := a.(int)
		if !ok || i > 2 {
			return nil, fmt.Errorf("range() takes up to 3 integers")
		}
		b[i] = n
	}
	if len(args) == 1 {
		b[0], b[1] = 0, b[0]
	}
	if b[2] == 0 {
		return nil, fmt.Errorf("range() step must not be zero")
	}
	// Its length, in floats so that no bound overflows.
	if n := math.Ceil((float64(b[1]) - float64(b[0])) / float64(b[2])); n > maxTemplateItems {
		return nil, fmt.Errorf("range() of more than %d items", maxTemplateItems)
	}
	var out []any
	for i := b[0]; (b[2] > 0 && i < b[1]) || (b[2] < 0 && i > b[1]); i += b[2] {
		out = append(out, i)
	}
	return out, nil
}

func strArg(args []any, i int, def string) string {
	if i < len(args) && args[i] != nil {
		return str(args[i])
	}
	return def
}

func method(x any, name string, args []any) (any, error) {
	if s, ok := x.(string); ok {
		switch name {
		case "strip":
			return trimPy(s, args, strings.Trim, strings.TrimSpace), nil
		case "lstrip":
			return trimPy(s, args, strings.TrimLeft, func(s string) string { return strings.TrimLeftFunc(s, unicode.IsSpace) }), nil
		case "rstrip":
			return trimPy(s, args, strings.TrimRight, func(s string) string { return strings.TrimRightFunc(s, unicode.IsSpace) }), nil
		case "upper":
			return strings.ToUpper(s), nil
		case "lower":
			return strings.ToLower(s), nil
		case "title":
			return title(s), nil
		case "capitalize":
			return capitalize(s), nil
		case "startswith":
			return strings.HasPrefix(s, strArg(args, 0, "")), nil
		case "endswith":
			return strings.HasSuffix(s, strArg(args, 0, "")), nil
		case "replace":
			old, new := strArg(args, 0, ""), strArg(args, 1, "")
			if grow := len(new) - len(old); grow > 0 && (strings.Count(s, old)+1)*grow > maxTemplateBytes-len(s) {
				return nil, fmt.Errorf("replace: a string of more than %d bytes", maxTemplateBytes)
			}
			return strings.ReplaceAll(s, old, new), nil
		case "split":
			var parts []string
			if len(args) == 0 || args[0] == nil {
				parts = strings.Fields(s)
			} else {
				sep := str(args[0])
				if n := strings.Count(s, sep); n >= maxTemplateItems {
					return nil, fmt.Errorf("split: more than %d parts", maxTemplateItems)
				}
				parts = strings.Split(s, sep)
			}
			out := make([]any, len(parts))
			for i, p := range parts {
				out[i] = p
			}
			return out, nil
		}
	}
	var m map[string]any
	switch v := x.(type) {
	case map[string]any:
		m = v
	case namespace:
		m = v
	}
	if m != nil {
		switch name {
		case "get":
			if v, ok := m[strArg(args, 0, "")]; ok {
				return v, nil
			}
			if len(args) > 1 {
				return args[1], nil
			}
			return nil, nil
		case "items":
			var out []any
			for _, k := range anyKeys(m) {
				out = append(out, []any{k, m[k.(string)]})
			}
			return out, nil
		case "keys":
			return anyKeys(m), nil
		case "values":
			var out []any
			for _, k := range anyKeys(m) {
				out = append(out, m[k.(string)])
			}
			return out, nil
		}
	}
	return nil, fmt.Errorf("%s has no method %s()", typeName(x), name)
}

func trimPy(s string, args []any, withSet func(string, string) string, ws func(string) string) string {
	if len(args) > 0 && args[0] != nil {
		return withSet(s, str(args[0]))
	}
	return ws(s)
}

func title(s string) string {
	rs := []rune(s)
	start := true
	for i, c := range rs {
		if unicode.IsLetter(c) {
			if start {
				rs[i] = unicode.ToUpper(c)
			} else {
				rs[i] = unicode.ToLower(c)
			}
			start = false
		} else {
			start = true
		}
	}
	return string(rs)
}

func capitalize(s string) string {
	rs := []rune(strings.ToLower(s))
	if len(rs) > 0 {
		rs[0] = unicode.ToUpper(rs[0])
	}
	return string(rs)
}

func applyFilter(name string, x any, args []any) (any, error) {
	switch name {
	case "trim":
		return strings.TrimSpace(str(x)), nil
	case "upper":
		return strings.ToUpper(str(x)), nil
	case "lower":
		return strings.ToLower(str(x)), nil
	case "capitalize":
		return capitalize(str(x)), nil
	case "title":
		return title(str(x)), nil
	case "string":
		return str(x), nil
	case "length", "count":
		switch v := x.(type) {
		case string:
			return len([]rune(v)), nil
		case []any:
			return len(v), nil
		case map[string]any:
			return len(v), nil
		}
		return nil, fmt.Errorf("length of %s", typeName(x))
	case "first", "last":
		l, err := iterate(x)
		if err != nil || len(l) == 0 {
			return undefined{}, err
		}
		if name == "first" {
			return l[0], nil
		}
		return l[len(l)-1], nil
	case "list":
		return iterate(x)
	case "join":
		l, err := iterate(x)
		if err != nil {
			return nil, err
		}
		sep := strArg(args, 0, "")
		parts := make([]string, len(l))
		n := 0
		for i, v := range l {
			parts[i] = str(v)
			if n += len(parts[i]) + len(sep); n > maxTemplateBytes {
				return nil, fmt.Errorf("join: a string of more than %d bytes", maxTemplateBytes)
			}
		}
		return strings.Join(parts, sep), nil
	case "default", "d":
		_, undef := x.(undefined)
		useDef := undef || (len(args) > 1 && truthy(args[1]) && !truthy(x))
		if useDef {
			if len(args) > 0 {
				return args[0], nil
			}
			return "", nil
		}
		return x, nil
	case "tojson":
		var b strings.Builder
		if err := toJSON(&b, x); err != nil {
			return nil, err
		}
		return b.String(), nil
	}
	return nil, fmt.Errorf("unknown filter %q", name)
}

// toJSON writes x as Python's json.dumps does by default: ", " and ": "
// separators, non-ASCII kept.
func toJSON(b *strings.Builder, x any) error {
	switch v := x.(type) {
	case []any:
		b.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				b.WriteString(", ")
			}
			if err := toJSON(b, e); err != nil {
				return err
			}
			if b.Len() > maxTemplateBytes {
				return fmt.Errorf("tojson: more than %d bytes", maxTemplateBytes)
			}
		}
		b.WriteByte(']')
		return nil
	case map[string]any, namespace:
		m, _ := v.(map[string]any)
		if ns, ok := v.(namespace); ok {
			m = ns
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteString(", ")
			}
			toJSON(b, k)
			b.WriteString(": ")
			if err := toJSON(b, m[k]); err != nil {
				return err
			}
			if b.Len() > maxTemplateBytes {
				return fmt.Errorf("tojson: more than %d bytes", maxTemplateBytes)
			}
		}
		b.WriteByte('}')
		return nil
	case undefined:
		return fmt.Errorf("tojson of an undefined value")
	}
	var buf strings.Builder
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(x); err != nil {
		return err
	}
	b.WriteString(strings.TrimSuffix(buf.String(), "\n"))
	return nil
}

func applyTest(name string, x any, args []any) (bool, error) {
	switch name {
	case "defined":
		_, undef := x.(undefined)
		return !undef, nil
	case "undefined":
		_, undef := x.(undefined)
		return undef, nil
	case "none":
		return x == nil, nil
	case "string":
		_, ok := x.(string)
		return ok, nil
	case "number":
		_, isBool := x.(bool)
		_, ok := number(x)
		return ok && !isBool, nil
	case "integer":
		_, ok := x.(int)
		return ok, nil
	case "boolean":
		_, ok := x.(bool)
		return ok, nil
	case "true", "false":
		b, ok := x.(bool)
		return ok && b == (name == "true"), nil
	case "mapping":
		switch x.(type) {
		case map[string]any, namespace:
			return true, nil
		}
		return false, nil
	case "iterable", "sequence":
		switch x.(type) {
		case []any, string, map[string]any:
			return true, nil
		}
		return false, nil
	case "odd", "even":
		n, ok := x.(int)
		if !ok {
			return false, fmt.Errorf("%s test of %s", name, typeName(x))
		}
		return (n%2 != 0) == (name == "odd"), nil
	case "eq", "equalto", "sameas":
		return len(args) == 1 && equal(x, args[0]), nil
	case "ne":
		return len(args) == 1 && !equal(x, args[0]), nil
	case "in":
		if len(args) != 1 {
			return false, fmt.Errorf("in test takes one argument")
		}
		return contains(args[0], x)
	}
	return false, fmt.Errorf("unknown test %q", name)
}
