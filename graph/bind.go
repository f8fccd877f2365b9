package graph

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/pinfer/pinfer/gguf"
	"github.com/pinfer/pinfer/ops"
	"github.com/pinfer/pinfer/predictors"
)

// Sources are the inputs a graph gets from outside, as [T,1] id columns.
const (
	srcTokens    = -1
	srcPositions = -2
)

var sources = map[string]int{"tokens": srcTokens, "positions": srcPositions}

// Program is a graph bound to one model file: every node resolved, checked
// and put in execution order.
type Program struct {
	Spec   *Spec
	Params map[string]any      // resolved: int64, float64, string or bool
	Nodes  []*Node             // in execution order
	Output int                 // index in Nodes of the logits
	Vocab  int                 // width of the logits
	Layers []*predictors.Layer // every FFN of the sparse nodes, in execution order

	// StateOf, where set, is the program this one stands in for, whose
	// per-position state its node StateAt keeps (an ops.HeldState: a
	// device executor's step holds the source program's KV caches on the
	// GPU). State files name StateOf and its nodes, so that each program
	// restores the other's.
	StateOf *Program
	StateAt int

	file *gguf.File // the model, which a saved state names (state.go)
}

// Node is one bound operator instance.
type Node struct {
	Where string // for messages: file, key path, id and block
	ID    string
	Op    *ops.Op
	In    []int // indices into Program.Nodes, or a source (< 0)
	W     []*ops.Weight
	A     ops.Attrs
	Cols  int
	// PosFloats: the values its State keeps per position (Op.PosFloats at
	// the bound widths), 0 for an op that keeps none.
	PosFloats int
	// For a sparse op: what its predictor sees, one per FFN inside it, and
	// where they start in Program.Layers.
	Layers     []*predictors.Layer
	FirstLayer int
}

type flatNode struct {
	spec  *NodeSpec
	block int // -1 outside the block
	where string
}

type binder struct {
	spec    *Spec
	f       *gguf.File
	params  map[string]any
	weights map[string]*ops.Weight
	named   map[string]bool // every tensor a bound slot names, found or not
}

// Build binds a graph to a model file.
func Build(spec *Spec, f *gguf.File) (*Program, error) {
	b := &binder{spec: spec, f: f, params: map[string]any{}, weights: map[string]*ops.Weight{}, named: map[string]bool{}}
	if err := b.resolveParams(); err != nil {
		return nil, err
	}
	flat, err := b.flatten()
	if err != nil {
		return nil, err
	}
	inputs, err := resolveNames(flat)
	if err != nil {
		return nil, err
	}
	order, err := topoOrder(flat, inputs)
	if err != nil {
		return nil, err
	}
	p := &Program{Spec: spec, Params: b.params, file: f}
	index := make([]int, len(flat)) // flat position -> execution position
	for pos, fi := range order {
		index[fi] = pos
	}
	for _, fi := range order {
		fn := flat[fi]
		n, err := b.bindNode(fn, inputs[fi], index, p.Nodes)
		if err != nil {
			return nil, err
		}
		if n.Op.Sparse {
			n.FirstLayer = len(p.Layers)
			n.Layers = sparseLayers(n, fn.block)
			p.Layers = append(p.Layers, n.Layers...)
		}
		p.Nodes = append(p.Nodes, n)
	}
	p.Output = index[len(flat)-1]
	if spec.Output != "" {
		p.Output = -1
		for i := len(flat) - 1; i >= 0 && p.Output < 0; i-- {
			if flat[i].spec.ID == spec.Output {
				p.Output = index[i]
			}
		}
		if p.Output < 0 {
			return nil, fmt.Errorf("%s: output: no node has id %q", spec.File, spec.Output)
		}
	}
	p.Vocab = p.Nodes[p.Output].Cols
	if err := deadEnd(p); err != nil {
		return nil, err
	}
	if err := b.unnamed(); err != nil {
		return nil, err
	}
	return p, nil
}

// deadEnd reports a node whose result nothing reads (bar the output): a
// misspelt id at the end of a block would otherwise leave the block
// computing nothing the logits see. Any node with no path to the output
// leads to such a node.
func deadEnd(p *Program) error {
	read := make([]bool, len(p.Nodes))
	for _, n := range p.Nodes {
		for _, in := range n.In {
			if in >= 0 {
				read[in] = true
			}
		}
	}
	for i, n := range p.Nodes {
		if !read[i] && i != p.Output {
			return fmt.Errorf("%s: nothing reads its result, so it never reaches the output %q", n.Where, p.Nodes[p.Output].ID)
		}
	}
	return nil
}

// resolveParams reads each parameter from the metadata, a literal, a default
// or another parameter, in any order of declaration.
func (b *binder) resolveParams() error {
	byName := map[string]*Param{}
	for i := range b.spec.Params {
		byName[b.spec.Params[i].Name] = &b.spec.Params[i]
	}
	visiting := map[string]bool{}
	var resolve func(name string) error
	resolve = func(name string) error {
		if _, done := b.params[name]; done {
			return nil
		}
		p := byName[name]
		where := fmt.Sprintf("%s: params.%s", b.spec.File, name)
		if visiting[name] {
			return fmt.Errorf("%s: parameters refer to each other in a loop", where)
		}
		visiting[name] = true
		if p.Key != "" {
			if v, ok := b.f.KV(p.Key); ok {
				val, err := scalar(v)
				if err != nil {
					return fmt.Errorf("%s: metadata key %q in %s: %v", where, p.Key, b.f.Path, err)
				}
				b.params[name] = val
				return nil
			}
			if !p.HasDflt {
				return fmt.Errorf("%s: metadata key %q is missing from %s and the parameter has no default", where, p.Key, b.f.Path)
			}
		}
		if ref, ok := p.Value.(string); ok && byName[ref] != nil {
			if err := resolve(ref); err != nil {
				return err
			}
			b.params[name] = b.params[ref]
			return nil
		}
		b.params[name] = p.Value
		return nil
	}
	for _, p := range b.spec.Params {
		if err := resolve(p.Name); err != nil {
			return err
		}
	}
	return nil
}

func scalar(v gguf.Value) (any, error) {
	switch x := v.V.(type) {
	case uint8:
		return int64(x), nil
	case int8:
		return int64(x), nil
	case uint16:
		return int64(x), nil
	case int16:
		return int64(x), nil
	case uint32:
		return int64(x), nil
	case int32:
		return int64(x), nil
	case uint64:
		return int64(x), nil
	case int64:
		return x, nil
	case float32:
		return float64(x), nil
	case float64:
		return x, nil
	case bool, string:
		return x, nil
	}
	return nil, fmt.Errorf("want a scalar, got an array")
}

// sparseLayers describes the FFNs inside a sparse node to predictors.
func sparseLayers(n *Node, block int) []*predictors.Layer {
	var ls []*predictors.Layer
	for e, f := range n.Op.FFNs(n.W, n.A) {
		ls = append(ls, predictors.NewLayer(block, e, f))
	}
	return ls
}

func (b *binder) flatten() ([]flatNode, error) {
	var flat []flatNode
	add := func(list []NodeSpec, block int) {
		for i := range list {
			w := fmt.Sprintf("%s: %s (id %q", b.spec.File, list[i].Path, list[i].ID)
			if block >= 0 {
				w += fmt.Sprintf(", block %d", block)
			}
			flat = append(flat, flatNode{spec: &list[i], block: block, where: w + ")"})
		}
	}
	add(b.spec.Nodes, -1)
	if blk := b.spec.Block; blk != nil {
		n, err := b.count(blk.Repeat)
		if err != nil {
			return nil, err
		}
		for i := 0; i < n; i++ {
			add(blk.Nodes, i)
		}
	}
	add(b.spec.Final, -1)
	if len(flat) == 0 {
		return nil, fmt.Errorf("%s: the graph has no nodes", b.spec.File)
	}
	return flat, nil
}

func (b *binder) count(repeat string) (int, error) {
	where := fmt.Sprintf("%s: block.repeat", b.spec.File)
	v, ok := b.params[repeat]
	if !ok {
		kv, found := b.f.KV(repeat)
		if !found {
			return 0, fmt.Errorf("%s: %q is neither a parameter nor a metadata key of %s", where, repeat, b.f.Path)
		}
		var err error
		if v, err = scalar(kv); err != nil {
			return 0, fmt.Errorf("%s: %v", where, err)
		}
	}
	n, err := asInt(v)
	if err != nil || n < 0 || n > 1<<16 {
		return 0, fmt.Errorf("%s: %q = %v is not a block count", where, repeat, v)
	}
	// A count below the file's blocks (a corrupt or hand-edited key) would
	// run a shallower model without a word; llama.cpp's loader, too,
	// refuses tensors it does not use.
	if t := b.blockTensor(int(n)); t != "" {
		from := ""
		if i := slices.IndexFunc(b.spec.Params, func(p Param) bool { return p.Name == repeat }); i >= 0 && b.spec.Params[i].Key != "" {
			from = fmt.Sprintf(" (metadata key %q)", b.spec.Params[i].Key)
		}
		return 0, fmt.Errorf("%s: %q = %d%s, but %s holds tensor %s", where, repeat, n, from, b.f.Path, t)
	}
	return int(n), nil
}

// unnamed refuses a file with a tensor that no slot of the graph names: an
// attention bias or a RoPE frequency table left unread changes the output
// without a word (llama.cpp's loader, too, refuses tensors it does not use).
func (b *binder) unnamed() error {
	for _, t := range b.f.Tensors {
		if !b.named[t.Name] {
			return fmt.Errorf("%s: tensor %s is not used by graph %q (%s), so the model would run without it; pass a graph that uses it with -g", b.f.Path, t.Name, b.spec.Name, b.spec.File)
		}
	}
	return nil
}

// blockTensor names the file's first tensor of a block numbered n or
// above ("blk.N."), or returns "".
func (b *binder) blockTensor(n int) string {
	for _, t := range b.f.Tensors {
		var k int
		if _, err := fmt.Sscanf(t.Name, "blk.%d.", &k); err == nil && k >= n {
			return t.Name
		}
	}
	return ""
}

// resolveNames maps each input to the nearest earlier node with that id, or,
// failing that, the first later one (which lets a cycle be written, and found).
func resolveNames(flat []flatNode) ([][]int, error) {
	ids := map[string][]int{}
	for i, fn := range flat {
		if _, reserved := sources[fn.spec.ID]; reserved {
			return nil, fmt.Errorf("%s: id %q is reserved for the graph's input", fn.where, fn.spec.ID)
		}
		ids[fn.spec.ID] = append(ids[fn.spec.ID], i)
	}
	out := make([][]int, len(flat))
	for i, fn := range flat {
		for _, name := range fn.spec.In {
			if s, ok := sources[name]; ok {
				out[i] = append(out[i], s)
				continue
			}
			defs := ids[name]
			if len(defs) == 0 {
				return nil, fmt.Errorf("%s: input %q: no node has this id (inputs: tokens, positions)", fn.where, name)
			}
			k := sort.SearchInts(defs, i) - 1 // nearest definition before i
			if k < 0 {
				k = 0
				if defs[0] == i {
					return nil, fmt.Errorf("%s: input %q: the node reads its own output (a cycle)", fn.where, name)
				}
			}
			out[i] = append(out[i], defs[k])
		}
	}
	return out, nil
}

// topoOrder sorts nodes so that each runs after its inputs, keeping the
// written order where it can, and reports a cycle by the ids on it.
func topoOrder(flat []flatNode, inputs [][]int) ([]int, error) {
	state := make([]int8, len(flat)) // 0 new, 1 on stack, 2 done
	var order []int
	var stack []int
	var visit func(i int) error
	visit = func(i int) error {
		switch state[i] {
		case 2:
			return nil
		case 1:
			var ids []string
			start := len(stack) - 1
			for start > 0 && stack[start] != i {
				start--
			}
			for _, j := range stack[start:] {
				ids = append(ids, strconv.Quote(flat[j].spec.ID))
			}
			ids = append(ids, strconv.Quote(flat[i].spec.ID))
			return fmt.Errorf("%s: the graph has a cycle: %s", flat[i].where, strings.Join(ids, " -> "))
		}
		state[i] = 1
		stack = append(stack, i)
		for _, in := range inputs[i] {
			if in >= 0 {
				if err := visit(in); err != nil {
					return err
				}
			}
		}
		stack = stack[:len(stack)-1]
		state[i] = 2
		order = append(order, i)
		return nil
	}
	for i := range flat {
		if err := visit(i); err != nil {
			return nil, err
		}
	}
	return order, nil
}

func (b *binder) bindNode(fn flatNode, in []int, index []int, done []*Node) (*Node, error) {
	s := fn.spec
	op, ok := ops.Lookup(s.Op)
	if !ok {
		return nil, fmt.Errorf("%s: op %q is not a known op (known: %s)", fn.where, s.Op, strings.Join(ops.Names(), ", "))
	}
	n := &Node{Where: fn.where, ID: s.ID, Op: op, A: ops.Attrs{}}
	if len(in) != op.Inputs {
		return nil, fmt.Errorf("%s: op %s takes %d inputs, %d given", fn.where, op.Name, op.Inputs, len(in))
	}
	widths := make([]int, len(in))
	for k, src := range in {
		if src < 0 {
			n.In = append(n.In, src)
			widths[k] = 1
			continue
		}
		n.In = append(n.In, index[src])
		widths[k] = done[index[src]].Cols
	}
	if err := b.bindAttrs(fn, op, n); err != nil {
		return nil, err
	}
	if err := b.bindWeights(fn, op, n); err != nil {
		return nil, err
	}
	cols, err := op.Shape(&ops.ShapeArgs{In: widths, W: n.W, A: n.A})
	if err != nil {
		return nil, fmt.Errorf("%s: op %s: %v", fn.where, op.Name, err)
	}
	n.Cols = cols
	if op.PosFloats != nil {
		n.PosFloats = op.PosFloats(widths, n.A)
	}
	return n, nil
}

func (b *binder) bindAttrs(fn flatNode, op *ops.Op, n *Node) error {
	known := map[string]bool{}
	for _, s := range op.Weights {
		known[s.Name] = true
	}
	for _, a := range op.Attrs {
		known[a.Name] = true
		raw, set := fn.spec.Attrs[a.Name]
		if !set {
			if a.Default == nil {
				return fmt.Errorf("%s: op %s needs attribute %q (%s)", fn.where, op.Name, a.Name, a.Kind)
			}
			n.A[a.Name] = a.Default
			continue
		}
		v, err := b.attrValue(a, raw)
		if err != nil {
			return fmt.Errorf("%s: attribute %q: %v", fn.where, a.Name, err)
		}
		n.A[a.Name] = v
	}
	for k := range fn.spec.Attrs {
		if !known[k] {
			var names []string
			for _, s := range op.Weights {
				names = append(names, s.Name)
			}
			for _, a := range op.Attrs {
				names = append(names, a.Name)
			}
			return fmt.Errorf("%s: op %s has no attribute %q (it has: %s)", fn.where, op.Name, k, strings.Join(names, ", "))
		}
	}
	return nil
}

func (b *binder) attrValue(a ops.AttrSpec, raw any) (any, error) {
	// A string names a parameter for number and boolean attributes, and may
	// for string ones (act = "act" reads the activation from the file).
	if name, ok := raw.(string); ok && a.Kind == ops.String {
		if pv, found := b.params[name]; found {
			if _, isStr := pv.(string); isStr {
				raw = pv
			}
		}
	}
	v := raw
	if name, ok := raw.(string); ok && a.Kind != ops.String {
		pv, found := b.params[name]
		if !found {
			return nil, fmt.Errorf("%q is not a parameter of this graph", name)
		}
		if pv == nil {
			return nil, fmt.Errorf("parameter %q has no value", name)
		}
		v = pv
	}
	switch a.Kind {
	case ops.Int:
		i, err := asInt(v)
		if err != nil {
			return nil, err
		}
		return int(i), nil
	case ops.Float:
		switch x := v.(type) {
		case int64:
			return float64(x), nil
		case float64:
			return x, nil
		}
		return nil, fmt.Errorf("want a number, got %s", describe(v))
	case ops.Bool:
		if x, ok := v.(bool); ok {
			return x, nil
		}
		return nil, fmt.Errorf("want a boolean, got %s", describe(v))
	}
	s, ok := v.(string)
	if !ok {
		return nil, fmt.Errorf("want a string, got %s", describe(v))
	}
	if len(a.Enum) > 0 {
		for _, e := range a.Enum {
			if e == s {
				return s, nil
			}
		}
		return nil, fmt.Errorf("%q is not one of %s", s, strings.Join(a.Enum, ", "))
	}
	return s, nil
}

func asInt(v any) (int64, error) {
	switch x := v.(type) {
	case int64:
		return x, nil
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
			return int64(x), nil
		}
	}
	if x, ok := v.(float64); ok {
		return 0, fmt.Errorf("want an integer, got %v", x)
	}
	// A string from the file may hold anything, newlines included.
	return 0, fmt.Errorf("want an integer, got %s", describe(v))
}

func (b *binder) bindWeights(fn flatNode, op *ops.Op, n *Node) error {
	for _, slot := range op.Weights {
		var names []string
		if raw, ok := fn.spec.Attrs[slot.Name]; ok {
			var err error
			if names, err = stringList(raw); err != nil {
				return fmt.Errorf("%s: %s: %v", fn.where, slot.Name, err)
			}
		}
		if len(names) == 0 {
			if !slot.Optional {
				return fmt.Errorf("%s: op %s needs a %s", fn.where, op.Name, slot.Name)
			}
			n.W = append(n.W, nil)
			continue
		}
		// A final "?" lets an optional weight be absent from the file.
		mayLack := false
		if last := names[len(names)-1]; strings.HasSuffix(last, "?") {
			if !slot.Optional {
				return fmt.Errorf("%s: %s %q: only an optional weight may end in ?", fn.where, slot.Name, last)
			}
			names = append(names[:len(names)-1:len(names)-1], strings.TrimSuffix(last, "?"))
			mayLack = true
		}
		// Every alternative counts as named, the ones not taken too: a file
		// may hold either (unnamed).
		tried := make([]string, len(names))
		for k, pat := range names {
			if strings.Contains(pat, "{i}") && fn.block < 0 {
				return fmt.Errorf("%s: %s %q uses {i} outside the block", fn.where, slot.Name, pat)
			}
			tried[k] = strings.ReplaceAll(pat, "{i}", strconv.Itoa(fn.block))
			src, _ := transposeOf(tried[k])
			b.named[src] = true
		}
		var w *ops.Weight
		for _, name := range tried {
			var err error
			if src, ok := transposeOf(name); ok {
				w, err = b.transposed(src)
			} else {
				w, err = b.weight(name, slot)
			}
			if err != nil {
				return fmt.Errorf("%s: %s: %v", fn.where, slot.Name, err)
			}
			if w != nil {
				break
			}
		}
		if w == nil && mayLack {
			n.W = append(n.W, nil)
			continue
		}
		if w == nil {
			return fmt.Errorf("%s: %s: tensor %s is not in %s", fn.where, slot.Name, strings.Join(tried, " or "), b.f.Path)
		}
		n.W = append(n.W, w)
	}
	return nil
}

// transposeOf reads "transpose(NAME)": NAME and true; else name and false.
func transposeOf(name string) (string, bool) {
	inner, ok := strings.CutPrefix(name, "transpose(")
	if !ok || !strings.HasSuffix(inner, ")") {
		return name, false
	}
	return strings.TrimSuffix(inner, ")"), true
}

// weight returns the named tensor, nil if the file lacks it.
func (b *binder) weight(name string, slot ops.Slot) (*ops.Weight, error) {
	if w, ok := b.weights[name]; ok {
		return w, nil
	}
	ti, ok := b.f.Tensor(name)
	if !ok {
		return nil, nil
	}
	w := &ops.Weight{Name: name}
	for _, d := range ti.Dims {
		w.Dims = append(w.Dims, int(d))
	}
	data := b.f.Data(ti)
	switch {
	case len(w.Dims) == 1 || (slot.Vector && ti.Elems() == ti.Dims[0]):
		w.Vec = make([]float32, ti.Elems())
		if err := ops.Dequantize(ti.Type, w.Vec, data); err != nil {
			return nil, fmt.Errorf("tensor %s in %s: %v", name, b.f.Path, err)
		}
	case len(w.Dims) == 2 || len(w.Dims) == 3:
		// A 3-D tensor (stacked experts) is one matrix of all its rows; the op
		// that reads it slices it by Dims[1].
		rows := w.Dims[1]
		if len(w.Dims) == 3 {
			rows *= w.Dims[2]
		}
		m, err := ops.NewMatrix(ti.Type, rows, w.Dims[0], data)
		if err != nil {
			return nil, fmt.Errorf("tensor %s in %s: %v", name, b.f.Path, err)
		}
		w.M = m
	default:
		return nil, fmt.Errorf("tensor %s in %s has dims %v: want 1, 2 or 3", name, b.f.Path, ti.Dims)
	}
	if slot.Vector && w.Vec == nil {
		return nil, fmt.Errorf("tensor %s in %s has dims %v: want a vector", name, b.f.Path, ti.Dims)
	}
	b.weights[name] = w
	return w, nil
}

// transposed loads a 2-D tensor and transposes it once, at load: the sparse
// FFN reads down projections one neuron row at a time, which a plain
// llama.cpp ffn_down {n_ff, n_embd} stores as columns. Plain types keep their
// type; quantized ones become q8_0 (one requantization, at load only).
func (b *binder) transposed(name string) (*ops.Weight, error) {
	key := "transpose(" + name + ")"
	if w, ok := b.weights[key]; ok {
		return w, nil
	}
	src, err := b.weight(name, ops.Slot{})
	if err != nil || src == nil {
		return src, err
	}
	if src.M == nil || len(src.Dims) != 2 {
		return nil, fmt.Errorf("tensor %s in %s has dims %v: only a matrix can be transposed", name, b.f.Path, src.Dims)
	}
	t, err := ops.Transpose(src.M)
	if err != nil {
		return nil, fmt.Errorf("tensor %s in %s: %v", name, b.f.Path, err)
	}
	w := &ops.Weight{Name: key, Dims: []int{src.Dims[1], src.Dims[0]}, M: t}
	b.weights[key] = w
	return w, nil
}
