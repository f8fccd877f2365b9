package server

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
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
	kw, err := r.evalKw(e.kwargs)
	if err != nil {
		return nil, err
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
			return replace(s, strArg(args, 0, ""), strArg(args, 1, ""), argAt(args, nil, 2, ""))
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
	if d, ok := asDict(x); ok {
		switch name {
		case "get":
			if v, ok := d.m[strArg(args, 0, "")]; ok {
				return v, nil
			}
			if len(args) > 1 {
				return args[1], nil
			}
			return nil, nil
		case "items":
			var out []any
			for _, k := range d.keys {
				out = append(out, []any{k, d.m[k]})
			}
			return out, nil
		case "keys":
			return d.anyKeys(), nil
		case "values":
			var out []any
			for _, k := range d.keys {
				out = append(out, d.m[k])
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

// replace is Python's str.replace(old, new, count); count is an int, or
// not given (undefined or none) for all.
func replace(s, old, new string, count any) (any, error) {
	n, ok := count.(int)
	if !ok || n < 0 {
		n = -1
	}
	if grow := len(new) - len(old); grow > 0 && (strings.Count(s, old)+1)*grow > maxTemplateBytes-len(s) {
		return nil, fmt.Errorf("replace: a string of more than %d bytes", maxTemplateBytes)
	}
	return strings.Replace(s, old, new, n), nil
}

func isUndefined(v any) bool { _, ok := v.(undefined); return ok }

// argAt is a filter's parameter i, passed by position or by its Jinja name;
// undefined when not passed.
func argAt(args []any, kw map[string]any, i int, name string) any {
	if i < len(args) {
		return args[i]
	}
	if v, ok := kw[name]; ok {
		return v
	}
	return undefined{}
}

// attrPath is Jinja's attribute getter for selectattr, map, sort and join:
// "a.b.0" looks up a, then b, then item 0.
func attrPath(x any, path string) any {
	for _, part := range strings.Split(path, ".") {
		if n, err := strconv.Atoi(part); err == nil {
			x = item(x, n)
		} else {
			x = item(x, part)
		}
	}
	return x
}

func applyFilter(name string, x any, args []any, kw map[string]any) (any, error) {
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
	case "replace":
		return replace(str(x), str(argAt(args, kw, 0, "old")), str(argAt(args, kw, 1, "new")), argAt(args, kw, 2, "count"))
	case "length", "count":
		switch v := x.(type) {
		case string:
			return len([]rune(v)), nil
		case []any:
			return len(v), nil
		case *dict:
			return len(v.keys), nil
		case undefined:
			return 0, nil
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
	case "reverse":
		if s, ok := x.(string); ok {
			rs := []rune(s)
			slices.Reverse(rs)
			return string(rs), nil
		}
		l, err := iterate(x)
		if err != nil {
			return nil, err
		}
		l = slices.Clone(l)
		slices.Reverse(l)
		return l, nil
	case "join":
		l, err := iterate(x)
		if err != nil {
			return nil, err
		}
		sep := str(argAt(args, kw, 0, "d"))
		attr, byAttr := argAt(args, kw, 1, "attribute").(string)
		parts := make([]string, len(l))
		n := 0
		for i, v := range l {
			if byAttr {
				v = attrPath(v, attr)
			}
			parts[i] = str(v)
			if n += len(parts[i]) + len(sep); n > maxTemplateBytes {
				return nil, fmt.Errorf("join: a string of more than %d bytes", maxTemplateBytes)
			}
		}
		return strings.Join(parts, sep), nil
	case "default", "d":
		if isUndefined(x) || truthy(argAt(args, kw, 1, "boolean")) && !truthy(x) {
			if v := argAt(args, kw, 0, "default_value"); !isUndefined(v) {
				return v, nil
			}
			return "", nil
		}
		return x, nil
	case "items":
		switch x.(type) {
		case undefined:
			return []any{}, nil
		case *dict, namespace:
			return method(x, "items", nil)
		}
		return nil, fmt.Errorf("items: %s is not a mapping", typeName(x))
	case "select", "reject", "selectattr", "rejectattr":
		return selectFilter(name, x, args)
	case "map":
		l, err := iterate(x)
		if err != nil {
			return nil, err
		}
		out := make([]any, len(l))
		if attr, ok := kw["attribute"]; ok {
			def, hasDef := kw["default"]
			for i, v := range l {
				if out[i] = attrPath(v, str(attr)); isUndefined(out[i]) && hasDef {
					out[i] = def
				}
			}
			return out, nil
		}
		if len(args) == 0 {
			return nil, fmt.Errorf("map needs a filter name or attribute=")
		}
		for i, v := range l {
			if out[i], err = applyFilter(str(args[0]), v, args[1:], kw); err != nil {
				return nil, err
			}
		}
		return out, nil
	case "sort":
		l, err := iterate(x)
		if err != nil {
			return nil, err
		}
		attr, byAttr := argAt(args, kw, 2, "attribute").(string)
		caseSensitive, rev := truthy(argAt(args, kw, 1, "case_sensitive")), truthy(argAt(args, kw, 0, "reverse"))
		key := func(v any) any {
			if byAttr {
				v = attrPath(v, attr)
			}
			if s, ok := v.(string); ok && !caseSensitive {
				return strings.ToLower(s)
			}
			return v
		}
		out := slices.Clone(l)
		// Stable, and reversed by the comparison rather than afterwards, so
		// that equal items keep their order as in Python's sorted(reverse=True).
		slices.SortStableFunc(out, func(a, b any) int {
			c, e := compare(key(a), key(b))
			if e != nil && err == nil {
				err = e
			}
			if rev {
				return -c
			}
			return c
		})
		return out, err
	case "int":
		return toInt(x, argAt(args, kw, 0, "default"), argAt(args, kw, 1, "base"))
	case "format":
		// Jinja's format is "value % (kwargs or args)": keywords fill
		// %(name)s conversions.
		if len(kw) > 0 {
			if len(args) > 0 {
				return nil, fmt.Errorf("format: positional and keyword arguments together")
			}
			d := sortedDict(kw)
			return pyFormat(str(x), []any{d}, d)
		}
		return pyFormat(str(x), args, nil)
	case "tojson":
		// The parameters are transformers' tojson(x, ensure_ascii, indent,
		// separators, sort_keys); only indent is heeded.
		w := &jsonWriter{}
		switch ind := argAt(args, kw, 1, "indent").(type) {
		case undefined, nil:
		case int:
			// Past maxTemplateBytes any line break fails; the clamp keeps
			// a scalar printable without building a huge indent.
			w.indent, w.lines = strings.Repeat(" ", min(max(ind, 0), maxTemplateBytes+1)), true
		case string:
			w.indent, w.lines = ind, true
		default:
			return nil, fmt.Errorf("tojson: indent must be an integer or a string, not %s", typeName(ind))
		}
		if err := w.value(x, 0); err != nil {
			return nil, err
		}
		return w.b.String(), nil
	}
	return nil, fmt.Errorf("unknown filter %q", name)
}

// selectFilter is select/reject (a test on each item, or its truth without
// one) and selectattr/rejectattr (the same on an attribute of each item).
func selectFilter(name string, x any, args []any) (any, error) {
	l, err := iterate(x)
	if err != nil {
		return nil, err
	}
	byAttr := strings.HasSuffix(name, "attr")
	var attr string
	if byAttr {
		if len(args) == 0 {
			return nil, fmt.Errorf("%s needs an attribute name", name)
		}
		attr, args = str(args[0]), args[1:]
	}
	keep := strings.HasPrefix(name, "select")
	out := []any{}
	for _, v := range l {
		t := v
		if byAttr {
			t = attrPath(v, attr)
		}
		ok := truthy(t)
		if len(args) > 0 {
			if ok, err = applyTest(str(args[0]), t, args[1:]); err != nil {
				return nil, err
			}
		}
		if ok == keep {
			out = append(out, v)
		}
	}
	return out, nil
}

// toInt is Jinja's int filter: a string in the base (or a float's text,
// truncated), a number truncated, else the default (0).
func toInt(x, def, base any) (any, error) {
	if isUndefined(def) {
		def = 0
	}
	b, ok := base.(int)
	if !ok {
		b = 10
	}
	switch v := x.(type) {
	case string:
		s := strings.TrimSpace(v)
		if n, err := strconv.ParseInt(s, b, 64); err == nil {
			return int(n), nil
		}
		if f, err := strconv.ParseFloat(s, 64); err == nil && math.Abs(f) < 1<<63 {
			return int(f), nil
		}
	case int:
		return v, nil
	case bool:
		if v {
			return 1, nil
		}
		return 0, nil
	case float64:
		if math.Abs(v) < 1<<63 {
			return int(v), nil
		}
	}
	return def, nil
}

// pyFormat is Python's printf-style "f % args", which Jinja's format
// filter is: flags, width and precision, the conversions s r d i f F e E g
// G x X o %, and "%(key)s", which takes m[key]. m is the mapping on the
// right of %, else nil; args is then that mapping alone, since a mapping
// is one argument to the conversions without a key.
func pyFormat(f string, args []any, m *dict) (string, error) {
	var b strings.Builder
	n := 0
	for i := 0; i < len(f); i++ {
		if f[i] != '%' {
			b.WriteByte(f[i])
			continue
		}
		j := i + 1
		key, keyed := "", j < len(f) && f[j] == '('
		if keyed {
			// The key runs to the matching ")": "%(a(b))s" reads "a(b)".
			depth := 0
			for ; j < len(f); j++ {
				if f[j] == '(' {
					depth++
				} else if f[j] == ')' {
					if depth--; depth == 0 {
						break
					}
				}
			}
			if j == len(f) {
				return "", fmt.Errorf("format: incomplete format key")
			}
			key = f[i+2 : j]
			j++
		}
		specStart := j
		for j < len(f) && strings.IndexByte("-+ #0123456789.", f[j]) >= 0 {
			j++
		}
		if j == len(f) {
			return "", fmt.Errorf("format: incomplete format")
		}
		spec, verb := f[specStart:j], f[j]
		i = j
		if verb == '%' {
			b.WriteByte('%')
			continue
		}
		// Width and precision are bounded so that one conversion cannot
		// allocate past the output's limit (a leading 0 is a flag).
		for _, d := range strings.FieldsFunc(spec, func(c rune) bool { return c < '0' || c > '9' }) {
			if len(strings.TrimLeft(d, "0")) > 4 {
				return "", fmt.Errorf("format: width or precision over 9999")
			}
		}
		var a any
		if keyed {
			if m == nil && len(args) == 1 {
				return "", fmt.Errorf("format: %%(%s) needs a mapping, not %s", key, typeName(args[0]))
			}
			if m == nil {
				return "", fmt.Errorf("format: %%(%s) needs a mapping", key)
			}
			v, ok := m.m[key]
			if !ok {
				return "", fmt.Errorf("format: no key %s in the mapping", repr(key))
			}
			// As in Python, a keyed conversion leaves the mapping to no
			// unkeyed one after it.
			a, n = v, len(args)
		} else {
			if n >= len(args) {
				return "", fmt.Errorf("format: not enough arguments for format string")
			}
			a = args[n]
			n++
		}
		switch verb {
		case 's':
			fmt.Fprintf(&b, "%"+spec+"s", str(a))
		case 'r':
			fmt.Fprintf(&b, "%"+spec+"s", repr(a))
		case 'd', 'i', 'x', 'X', 'o', 'f', 'F', 'e', 'E', 'g', 'G':
			num, ok := number(a)
			if !ok {
				return "", fmt.Errorf("%%%c format: a number is required, not %s", verb, typeName(a))
			}
			switch verb {
			case 'd', 'i':
				fmt.Fprintf(&b, "%"+spec+"d", int64(num))
			case 'x', 'X', 'o':
				fmt.Fprintf(&b, "%"+spec+string(verb), int64(num))
			default:
				fmt.Fprintf(&b, "%"+spec+string(verb), num)
			}
		default:
			return "", fmt.Errorf("format: unsupported conversion %%%c", verb)
		}
		if b.Len() > maxTemplateBytes {
			return "", fmt.Errorf("format: a string of more than %d bytes", maxTemplateBytes)
		}
	}
	if n < len(args) && m == nil {
		return "", fmt.Errorf("format: not all arguments converted during string formatting")
	}
	return b.String(), nil
}

// jsonWriter writes values as Python's json.dumps(ensure_ascii=False)
// does: without an indent on one line, items separated by ", "; with one
// (lines), each item on its own line, indented by depth, and followed by
// ",". Either way a key is followed by ": ".
type jsonWriter struct {
	b      strings.Builder
	indent string
	lines  bool
}

func (w *jsonWriter) value(x any, depth int) error {
	switch v := x.(type) {
	case []any:
		w.b.WriteByte('[')
		for i, e := range v {
			if err := w.item(i, depth+1); err != nil {
				return err
			}
			if err := w.value(e, depth+1); err != nil {
				return err
			}
		}
		if len(v) > 0 {
			if err := w.newline(depth); err != nil {
				return err
			}
		}
		w.b.WriteByte(']')
		return nil
	case *dict, namespace:
		d, _ := asDict(v)
		w.b.WriteByte('{')
		for i, k := range d.keys {
			if err := w.item(i, depth+1); err != nil {
				return err
			}
			w.value(k, depth+1)
			w.b.WriteString(": ")
			if err := w.value(d.m[k], depth+1); err != nil {
				return err
			}
		}
		if len(d.keys) > 0 {
			if err := w.newline(depth); err != nil {
				return err
			}
		}
		w.b.WriteByte('}')
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
	w.b.WriteString(strings.TrimSuffix(buf.String(), "\n"))
	return nil
}

// item starts item i of a list or mapping whose items are at depth; it
// also stops the output past maxTemplateBytes.
func (w *jsonWriter) item(i, depth int) error {
	if i > 0 && w.lines {
		w.b.WriteByte(',')
	} else if i > 0 {
		w.b.WriteString(", ")
	}
	return w.newline(depth)
}

// newline breaks the line and indents it to depth, when there is an
// indent; the check comes first, since one indent can be long.
func (w *jsonWriter) newline(depth int) error {
	if w.b.Len() > maxTemplateBytes || w.lines && w.b.Len()+1+len(w.indent)*depth > maxTemplateBytes {
		return fmt.Errorf("tojson: more than %d bytes", maxTemplateBytes)
	}
	if w.lines {
		w.b.WriteByte('\n')
		for range depth {
			w.b.WriteString(w.indent)
		}
	}
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
		case *dict, namespace:
			return true, nil
		}
		return false, nil
	case "iterable", "sequence":
		switch x.(type) {
		case []any, string, *dict:
			return true, nil
		}
		return false, nil
	case "odd", "even":
		n, ok := x.(int)
		if !ok {
			return false, fmt.Errorf("%s test of %s", name, typeName(x))
		}
		return (n%2 != 0) == (name == "odd"), nil
	case "eq", "equalto", "==", "sameas":
		return len(args) == 1 && equal(x, args[0]), nil
	case "ne", "!=":
		return len(args) == 1 && !equal(x, args[0]), nil
	case "in":
		if len(args) != 1 {
			return false, fmt.Errorf("in test takes one argument")
		}
		return contains(args[0], x)
	}
	return false, fmt.Errorf("unknown test %q", name)
}
