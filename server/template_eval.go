package server

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Values are Go's: string, int, float64, bool, nil (none), []any, plus *dict
// for mappings, undefined for names and keys that do not exist, and namespace.
type undefined struct{}

// dict is a mapping that lists its keys in the order they were first set,
// as a Python dict does: {"b": 1, "a": 2} | tojson keeps b before a.
type dict struct {
	keys []string
	m    map[string]any
}

func newDict(n int) *dict { return &dict{keys: make([]string, 0, n), m: make(map[string]any, n)} }

// set is d[k] = v: a key set again keeps its first place.
func (d *dict) set(k string, v any) {
	if _, ok := d.m[k]; !ok {
		d.keys = append(d.keys, k)
	}
	d.m[k] = v
}

// sortedDict views a Go map as a dict, its keys sorted since Go keeps no
// order; the dict shares the map.
func sortedDict[M ~map[string]any](m M) *dict {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return &dict{keys: keys, m: m}
}

// asDict is a mapping (a dict or a namespace) as a dict.
func asDict(v any) (*dict, bool) {
	switch v := v.(type) {
	case *dict:
		return v, true
	case namespace:
		return sortedDict(v), true
	}
	return nil, false
}

// fromGo copies a value given to Render with its maps made dicts, so that
// the rest of the engine has one kind of mapping. Their keys are sorted: a
// request's messages, decoded from JSON, have lost their order already.
func fromGo(v any, depth int) (any, error) {
	if depth > maxTemplateDepth {
		return nil, fmt.Errorf("a value nests more than %d deep", maxTemplateDepth)
	}
	switch v := v.(type) {
	case *dict: // built in order (tools.go): JSON the request sent
		return v, nil
	case map[string]any:
		src := sortedDict(v)
		d := newDict(len(src.keys))
		for _, k := range src.keys {
			x, err := fromGo(v[k], depth+1)
			if err != nil {
				return nil, err
			}
			d.set(k, x)
		}
		return d, nil
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			var err error
			if out[i], err = fromGo(x, depth+1); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	return v, nil
}

// namespace is Jinja's mutable object, the one way to carry a value out of a loop.
type namespace map[string]any

// loopInfo is the "loop" variable of a for block.
type loopInfo struct {
	index, length int
	prev, next    any
}

// raised is the error of raise_exception, shown to the client as it is.
type raised struct{ msg string }

func (r *raised) Error() string { return r.msg }

type renderer struct {
	out    strings.Builder
	scopes []map[string]any
	steps  int // expressions evaluated and loop passes, at most maxTemplateSteps
}

// step counts one evaluation against maxTemplateSteps.
func (r *renderer) step() error {
	if r.steps++; r.steps > maxTemplateSteps {
		return fmt.Errorf("the template takes more than %d steps", maxTemplateSteps)
	}
	return nil
}

// weigh measures v's printed size, counting a shared part each time it
// appears: an error once that passes maxTemplateBytes or v nests deeper than
// maxTemplateDepth (a namespace that holds itself does both). Printing
// (repr, toJSON) stops past maxTemplateBytes itself, since a namespace that
// grows after it was put in a list grows that list's print too.
func weigh(v any) error {
	n := 0
	var walk func(v any, depth int) error
	walk = func(v any, depth int) error {
		if depth > maxTemplateDepth {
			return fmt.Errorf("a value nests more than %d deep", maxTemplateDepth)
		}
		n += 4 // quotes, separators, small scalars
		var m map[string]any
		switch v := v.(type) {
		case string:
			n += len(v)
		case []any:
			for _, x := range v {
				if err := walk(x, depth+1); err != nil {
					return err
				}
			}
		case *dict:
			m = v.m
		case namespace:
			m = v
		}
		for k, x := range m {
			n += len(k)
			if err := walk(x, depth+1); err != nil {
				return err
			}
		}
		if n > maxTemplateBytes {
			return fmt.Errorf("the template builds a value of more than %d bytes", maxTemplateBytes)
		}
		return nil
	}
	return walk(v, 0)
}

// write adds s to the output, within maxTemplateBytes.
func (r *renderer) write(s string) error {
	if r.out.Len()+len(s) > maxTemplateBytes {
		return fmt.Errorf("the template writes more than %d bytes", maxTemplateBytes)
	}
	r.out.WriteString(s)
	return nil
}

func (r *renderer) lookup(name string) any {
	for i := len(r.scopes) - 1; i >= 0; i-- {
		if v, ok := r.scopes[i][name]; ok {
			return v
		}
	}
	return undefined{}
}

func (r *renderer) nodes(ns []node) error {
	for _, n := range ns {
		if err := r.node(n); err != nil {
			return err
		}
	}
	return nil
}

func (r *renderer) node(n node) error {
	switch n := n.(type) {
	case textNode:
		return r.write(string(n))
	case outNode:
		v, err := r.eval(n.e)
		if err != nil {
			return err
		}
		return r.write(str(v))
	case *ifNode:
		for i, c := range n.conds {
			v, err := r.eval(c)
			if err != nil {
				return err
			}
			if truthy(v) {
				return r.nodes(n.bodies[i])
			}
		}
		return r.nodes(n.els)
	case *forNode:
		return r.forLoop(n)
	case *setNode:
		v, err := r.eval(n.e)
		if err != nil {
			return err
		}
		if n.attr == "" {
			r.scopes[len(r.scopes)-1][n.name] = v
			return nil
		}
		ns, ok := r.lookup(n.name).(namespace)
		if !ok {
			return fmt.Errorf("set %s.%s: %s is not a namespace", n.name, n.attr, n.name)
		}
		ns[n.attr] = v
		if err := weigh(ns); err != nil {
			return fmt.Errorf("set %s.%s: %v", n.name, n.attr, err)
		}
	}
	return nil
}

func (r *renderer) forLoop(n *forNode) error {
	it, err := r.eval(n.iter)
	if err != nil {
		return err
	}
	items, err := iterate(it)
	if err != nil {
		return fmt.Errorf("for %s: %v", strings.Join(n.vars, ", "), err)
	}
	scope := map[string]any{}
	r.scopes = append(r.scopes, scope)
	defer func() { r.scopes = r.scopes[:len(r.scopes)-1] }()
	bind := func(item any) error {
		if len(n.vars) == 1 {
			scope[n.vars[0]] = item
			return nil
		}
		tuple, ok := item.([]any)
		if !ok || len(tuple) != len(n.vars) {
			return fmt.Errorf("for %s: cannot unpack %s", strings.Join(n.vars, ", "), str(item))
		}
		for i, v := range n.vars {
			scope[v] = tuple[i]
		}
		return nil
	}
	if n.filter != nil {
		var kept []any
		for _, item := range items {
			if err := bind(item); err != nil {
				return err
			}
			v, err := r.eval(n.filter)
			if err != nil {
				return err
			}
			if truthy(v) {
				kept = append(kept, item)
			}
		}
		items = kept
	}
	if len(items) == 0 {
		return r.nodes(n.els)
	}
	for i, item := range items {
		if err := r.step(); err != nil {
			return err
		}
		if err := bind(item); err != nil {
			return err
		}
		li := &loopInfo{index: i, length: len(items)}
		if i > 0 {
			li.prev = items[i-1]
		} else {
			li.prev = undefined{}
		}
		if i+1 < len(items) {
			li.next = items[i+1]
		} else {
			li.next = undefined{}
		}
		scope["loop"] = li
		if err := r.nodes(n.body); err != nil {
			return err
		}
	}
	return nil
}

// iterate lists what a for loop visits: a list's items, a string's
// characters, a mapping's keys in order.
func iterate(v any) ([]any, error) {
	switch v := v.(type) {
	case []any:
		return v, nil
	case string:
		if len(v) > maxTemplateItems {
			return nil, fmt.Errorf("a string of more than %d bytes taken character by character", maxTemplateItems)
		}
		var out []any
		for _, c := range v {
			out = append(out, string(c))
		}
		return out, nil
	case *dict, namespace:
		d, _ := asDict(v)
		return d.anyKeys(), nil
	case undefined, nil:
		return nil, nil
	}
	return nil, fmt.Errorf("%s is not iterable", typeName(v))
}

func (d *dict) anyKeys() []any {
	out := make([]any, len(d.keys))
	for i, k := range d.keys {
		out[i] = k
	}
	return out
}

func truthy(v any) bool {
	switch v := v.(type) {
	case nil, undefined:
		return false
	case bool:
		return v
	case string:
		return v != ""
	case int:
		return v != 0
	case float64:
		return v != 0
	case []any:
		return len(v) > 0
	case *dict:
		return len(v.keys) > 0
	}
	return true
}

// str renders a value as Jinja prints it (Python's str).
func str(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case undefined:
		return ""
	case nil:
		return "None"
	case bool:
		if v {
			return "True"
		}
		return "False"
	case int:
		return strconv.Itoa(v)
	case float64:
		if v == math.Trunc(v) && math.Abs(v) < 1e16 {
			return strconv.FormatFloat(v, 'f', 1, 64)
		}
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	return repr(v)
}

// repr is Python's repr, for values inside lists and dicts.
func repr(v any) string {
	switch v := v.(type) {
	case string:
		return "'" + strings.ReplaceAll(strings.ReplaceAll(v, `\`, `\\`), "'", `\'`) + "'"
	case []any:
		var b strings.Builder
		b.WriteByte('[')
		for i, x := range v {
			if i > 0 {
				b.WriteString(", ")
			}
			if b.WriteString(repr(x)); b.Len() > maxTemplateBytes {
				break // past the limit: what receives it refuses it
			}
		}
		b.WriteByte(']')
		return b.String()
	case *dict:
		return reprDict(v)
	case namespace:
		return "<Namespace " + reprDict(sortedDict(v)) + ">"
	case *loopInfo:
		return "<LoopContext>"
	}
	return str(v)
}

func reprDict(d *dict) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, k := range d.keys {
		if i > 0 {
			b.WriteString(", ")
		}
		if b.WriteString(repr(k) + ": " + repr(d.m[k])); b.Len() > maxTemplateBytes {
			break // as in repr
		}
	}
	b.WriteByte('}')
	return b.String()
}

func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "none"
	case undefined:
		return "undefined"
	case string:
		return "a string"
	case int, float64:
		return "a number"
	case bool:
		return "a boolean"
	case []any:
		return "a list"
	case *dict, namespace:
		return "a mapping"
	}
	return fmt.Sprintf("%T", v)
}
