// Package graph reads a model family's TOML operator graph, checks it, binds
// it to a GGUF file's weights and metadata, plans its buffers and runs it.
package graph

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/BurntSushi/toml"
)

// Spec is a parsed graph file, before it meets a model.
type Spec struct {
	File string // where it came from, for error messages
	Name string
	Arch string // general.architecture this graph runs
	// Match lists alternatives: the graph runs a file when, for any one of
	// them, every key's metadata is one of its values: a string, or a
	// number or bool as written ("*": is present, "-": is absent, "!v":
	// is present and not v).
	Match  []map[string][]string
	Params []Param
	Nodes  []NodeSpec // run once, before the blocks
	Block  *Block
	Final  []NodeSpec // run once, after the blocks
	Output string     // id of the logits node; default: the last node
}

// Param binds a name to a metadata key, a literal, or a key with a default.
type Param struct {
	Name    string
	Key     string // metadata key; "" for a literal
	Value   any    // literal value, or the default (nil: required); a string names another param
	HasDflt bool
}

// Block is the repeated part; {i} in its weight names is the block index.
type Block struct {
	Repeat string // a param name or a metadata key
	Nodes  []NodeSpec
}

// NodeSpec is one node as written.
type NodeSpec struct {
	Path  string // key path in the file, e.g. block.nodes[3]
	ID    string
	Op    string
	In    []string
	Attrs map[string]any // attributes, and weights named by the op's slots
}

// LoadSpecFile reads and parses a graph file.
func LoadSpecFile(path string) (*Spec, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseSpec(path, b)
}

var oneLine = strings.NewReplacer("\n", `\n`, "\r", `\r`)

// ParseSpec parses a graph from TOML text; name is used in errors.
func ParseSpec(name string, text []byte) (*Spec, error) {
	var doc map[string]any
	if _, err := toml.Decode(string(text), &doc); err != nil {
		var pe toml.ParseError
		// The parser quotes the offending text, which may hold a newline.
		if errors.As(err, &pe) {
			return nil, fmt.Errorf("%s: line %d: %s", name, pe.Position.Line, oneLine.Replace(pe.Message))
		}
		return nil, fmt.Errorf("%s: %s", name, oneLine.Replace(err.Error()))
	}
	p := &specParser{file: name}
	s := p.parse(doc)
	if p.err != nil {
		return nil, p.err
	}
	return s, nil
}

type specParser struct {
	file string
	err  error
}

func (p *specParser) fail(path, format string, a ...any) {
	if p.err == nil {
		p.err = fmt.Errorf("%s: %s: %s", p.file, path, fmt.Sprintf(format, a...))
	}
}

func (p *specParser) str(m map[string]any, path, key string, required bool) string {
	v, ok := m[key]
	if !ok {
		if required {
			p.fail(path, "missing key %q", key)
		}
		return ""
	}
	s, ok := v.(string)
	if !ok {
		p.fail(join(path, key), "want a string, got %s", describe(v))
	}
	return s
}

func (p *specParser) parse(doc map[string]any) *Spec {
	s := &Spec{File: p.file}
	p.allowKeys(doc, "", "name", "arch", "match", "params", "node", "block", "final", "output")
	s.Name = p.str(doc, "(top)", "name", true)
	s.Arch = p.str(doc, "(top)", "arch", true)
	s.Output = p.str(doc, "(top)", "output", false)
	s.Match = p.match(doc["match"])
	if m, ok := p.table(doc, "", "params"); ok {
		s.Params = p.params(m)
	}
	s.Nodes = p.nodes(doc, "", "node")
	if m, ok := p.table(doc, "", "block"); ok {
		p.allowKeys(m, "block", "repeat", "nodes", "node")
		s.Block = &Block{Repeat: p.str(m, "block", "repeat", true)}
		s.Block.Nodes = append(p.nodes(m, "block", "nodes"), p.nodes(m, "block", "node")...)
		if len(s.Block.Nodes) == 0 {
			p.fail("block", "has no nodes")
		}
	}
	s.Final = p.nodes(doc, "", "final")
	return s
}

// match reads a table of key = "value" or key = ["value", ...], or a list
// of such tables.
func (p *specParser) match(v any) []map[string][]string {
	var tables []map[string]any
	switch v := v.(type) {
	case nil:
		return nil
	case map[string]any:
		tables = []map[string]any{v}
	case []map[string]any:
		tables = v
	case []any:
		for _, e := range v {
			t, ok := e.(map[string]any)
			if !ok {
				p.fail("match", "want a table or a list of tables, got a list holding %s", describe(e))
				return nil
			}
			tables = append(tables, t)
		}
	default:
		p.fail("match", "want a table or a list of tables, got %s", describe(v))
		return nil
	}
	var out []map[string][]string
	for i, t := range tables {
		m := map[string][]string{}
		for _, k := range sortedKeys(t) {
			var vs []string
			switch v := t[k].(type) {
			case string:
				vs = []string{v}
			case []any:
				for _, e := range v {
					if s, ok := e.(string); ok {
						vs = append(vs, s)
					}
				}
				if len(vs) != len(v) || len(vs) == 0 {
					vs = nil
				}
			}
			if vs == nil {
				p.fail(fmt.Sprintf("match[%d].%s", i, k), "want a string or a non-empty list of strings, got %s", describe(t[k]))
			}
			m[k] = vs
		}
		out = append(out, m)
	}
	return out
}

func (p *specParser) table(m map[string]any, path, key string) (map[string]any, bool) {
	v, ok := m[key]
	if !ok {
		return nil, false
	}
	t, ok := v.(map[string]any)
	if !ok {
		p.fail(join(path, key), "want a table, got %s", describe(v))
	}
	return t, ok
}

func (p *specParser) allowKeys(m map[string]any, path string, allowed ...string) {
	for _, k := range sortedKeys(m) {
		found := false
		for _, a := range allowed {
			found = found || a == k
		}
		if !found {
			p.fail(join(path, k), "unknown key (allowed: %s)", strings.Join(allowed, ", "))
		}
	}
}

func (p *specParser) params(m map[string]any) []Param {
	var out []Param
	for _, name := range sortedKeys(m) {
		path := join("params", name)
		switch v := m[name].(type) {
		case string:
			out = append(out, Param{Name: name, Key: v})
		case int64, float64, bool:
			out = append(out, Param{Name: name, Value: v})
		case map[string]any:
			p.allowKeys(v, path, "key", "default")
			d, has := v["default"]
			out = append(out, Param{Name: name, Key: p.str(v, path, "key", true), Value: d, HasDflt: has})
		default:
			p.fail(path, "want a metadata key, a number or {key, default}, got %s", describe(v))
		}
	}
	return out
}

var nodeKeys = map[string]bool{"id": true, "op": true, "in": true}

func (p *specParser) nodes(m map[string]any, path, key string) []NodeSpec {
	v, ok := m[key]
	if !ok {
		return nil
	}
	list, ok := v.([]map[string]any)
	if !ok {
		if anyList, ok2 := v.([]any); ok2 {
			for _, e := range anyList {
				t, ok3 := e.(map[string]any)
				if !ok3 {
					p.fail(join(path, key), "want a list of node tables, got %s", describe(e))
					return nil
				}
				list = append(list, t)
			}
		} else {
			p.fail(join(path, key), "want a list of node tables, got %s", describe(v))
			return nil
		}
	}
	var out []NodeSpec
	for i, t := range list {
		np := fmt.Sprintf("%s[%d]", join(path, key), i)
		n := NodeSpec{Path: np, Attrs: map[string]any{}}
		n.ID = p.str(t, np, "id", true)
		n.Op = p.str(t, np, "op", true)
		if in, ok := t["in"]; ok {
			n.In = p.strings(join(np, "in"), in)
		}
		for _, k := range sortedKeys(t) {
			if nodeKeys[k] {
				continue
			}
			n.Attrs[k] = t[k]
		}
		out = append(out, n)
	}
	return out
}

func (p *specParser) strings(path string, v any) []string {
	out, err := stringList(v)
	if err != nil {
		p.fail(path, "%v", err)
	}
	return out
}

func stringList(v any) ([]string, error) {
	switch v := v.(type) {
	case string:
		return []string{v}, nil
	case []any:
		var out []string
		for _, e := range v {
			s, ok := e.(string)
			if !ok {
				return nil, fmt.Errorf("want strings, got %s", describe(e))
			}
			out = append(out, s)
		}
		return out, nil
	}
	return nil, fmt.Errorf("want a string or a list of strings, got %s", describe(v))
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func describe(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case int64:
		return "an integer"
	case float64:
		return "a number"
	case bool:
		return "a boolean"
	case []any, []map[string]any:
		return "a list"
	case map[string]any:
		return "a table"
	}
	return fmt.Sprintf("%T", v)
}

func sortedKeys(m map[string]any) []string {
	k := make([]string, 0, len(m))
	for s := range m {
		k = append(k, s)
	}
	sort.Strings(k)
	return k
}
