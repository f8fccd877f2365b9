package predictors

import (
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/pinfer/pinfer/ops"
)

// The host API that plugins import as "pinfer/host". Every value a script
// gets is an opaque handle or a copy: a script can never write into the
// weights (read-only mmap: a write would crash the process) nor into the
// executor's activations (it would silently change the output).
//
// Script-visible names are mapped in hostExports; the Go names here are
// unexported so the API is not part of package predictors' own.

// vec is host.Vec: a plain float32 vector the script owns or borrows.
type vec []float32

// hostLayer is host.Layer: one FFN's sizes as plain fields (the script's
// own copy), its other facts through methods, and the plugin's native
// scratch for it.
type hostLayer struct {
	Index, NEmbd, NFF int // block index, embedding width, neurons
	// Expert inside a mixture of experts, else 0: the experts of a block
	// share its Index, so per-FFN state keys by (Index, Expert).
	Expert int
	s      *layerState
}

type layerState struct {
	l       *Layer
	rates   vec // a copy: the script may scribble on it
	scratch map[string]vec
	h       vec // fc1 output
	scores  vec // MLPScores result
	gate    vec // GateScores result
	resid   vec // Input.Resid copy
	normed  vec // Input.Normed copy
	in      Input
	failed  bool // reported; this layer now runs dense
}

// hostInput is host.Input: the current token's vectors, handed out as
// copies on demand.
type hostInput struct{ s *layerState }

// hostMatrix is host.Matrix: a weight matrix the script can multiply by but
// not read or write.
type hostMatrix struct{ m *ops.Matrix }

func newLayerState(l *Layer) *layerState {
	s := &layerState{l: l, scratch: map[string]vec{}}
	if l.Rates != nil {
		s.rates = append(vec(nil), l.Rates...)
	}
	return s
}

func (h hostLayer) Act() string        { return h.s.l.Act }
func (h hostLayer) Threshold() float32 { return h.s.l.Threshold }
func (h hostLayer) PredCut() float32   { return h.s.l.PredCut }
func (h hostLayer) HasMLP() bool       { return h.s.l.FC1 != nil && h.s.l.FC2 != nil }

// Rank is the predictor's hidden width (fc1's rows), 0 without one.
func (h hostLayer) Rank() int {
	if h.s.l.FC1 == nil {
		return 0
	}
	return h.s.l.FC1.Rows
}

// Rates are the profiled per-neuron activation rates, nil without a profile.
func (h hostLayer) Rates() vec { return h.s.rates }

// Scratch is a named per-layer vector of n zeros, kept across calls: the
// place for state a script learns per neuron.
func (h hostLayer) Scratch(name string, n int) vec {
	v, ok := h.s.scratch[name]
	if !ok || len(v) != n {
		if n < 0 {
			panic(fmt.Sprintf("host: Scratch(%q, %d): negative length", name, n))
		}
		v = make(vec, n)
		h.s.scratch[name] = v
	}
	return v
}

func (h hostLayer) Gate() hostMatrix { return hostMatrix{h.s.l.Gate} }
func (h hostLayer) Up() hostMatrix   { return hostMatrix{h.s.l.Up} }
func (h hostLayer) FC1() hostMatrix  { return hostMatrix{h.s.l.FC1} }
func (h hostLayer) FC2() hostMatrix  { return hostMatrix{h.s.l.FC2} }

func (m hostMatrix) Valid() bool { return m.m != nil }
func (m hostMatrix) Rows() int   { return m.must().Rows }
func (m hostMatrix) Cols() int   { return m.must().Cols }

func (m hostMatrix) must() *ops.Matrix {
	if m.m == nil {
		panic("host: the layer has no such matrix")
	}
	return m.m
}

// Resid is the predictor's input (the residual before the FFN norm).
func (in hostInput) Resid() vec {
	in.s.resid = append(in.s.resid[:0], in.s.in.Resid...)
	return in.s.resid
}

// Normed is the FFN's own input, what the gate multiplies.
func (in hostInput) Normed() vec {
	in.s.normed = append(in.s.normed[:0], in.s.in.Normed...)
	return in.s.normed
}

// hostMLPScores is relu(resid·fc1)·fc2, natively, into the layer's scratch.
func hostMLPScores(l hostLayer, in hostInput) vec {
	s := l.s
	if s.l.FC1 == nil || s.l.FC2 == nil {
		panic(fmt.Sprintf("host: MLPScores: layer %d has no fc1/fc2 (check Layer.HasMLP)", s.l.Index))
	}
	s.h = growVec(s.h, s.l.FC1.Rows)
	s.scores = growVec(s.scores, s.l.NFF)
	s.l.MLPScores(s.in.Pool, s.in.Resid, s.h, s.scores)
	return s.scores
}

// hostGateScores is the real gate pre-activation: exact and as costly as
// the oracle.
func hostGateScores(l hostLayer, in hostInput) vec {
	s := l.s
	s.gate = growVec(s.gate, s.l.NFF)
	s.l.GateScores(s.in.Pool, s.in.Normed, s.gate)
	return s.gate
}

// hostFired is the true active set of this token, at the oracle's cost.
func hostFired(l hostLayer, in hostInput) []int32 {
	s := l.s
	s.gate = growVec(s.gate, s.l.NFF)
	return s.l.Fired(s.in.Pool, s.in.Normed, s.gate, nil)
}

// hostGateAt is the gate pre-activation of the given neurons only.
func hostGateAt(l hostLayer, in hostInput, ids []int32) vec {
	return hostDotRows(l.Gate(), ids, in.s.in.Normed)
}

func hostMatVec(m hostMatrix, x vec) vec {
	mm := m.must()
	if len(x) < mm.Cols {
		panic(fmt.Sprintf("host: MatVec: vector of %d for a matrix of %d columns", len(x), mm.Cols))
	}
	out := make(vec, mm.Rows)
	ops.MatMul(nil, out, mm, x, 1)
	return out
}

func hostDotRows(m hostMatrix, ids []int32, x vec) vec {
	mm := m.must()
	if len(x) < mm.Cols {
		panic(fmt.Sprintf("host: DotRows: vector of %d for a matrix of %d columns", len(x), mm.Cols))
	}
	out := make(vec, len(ids))
	for k, id := range ids {
		if id < 0 || int(id) >= mm.Rows {
			panic(fmt.Sprintf("host: DotRows: row %d out of range [0,%d)", id, mm.Rows))
		}
		out[k] = mm.DotRow(int(id), x)
	}
	return out
}

func sameLen(op string, a, b vec) {
	if len(a) != len(b) {
		panic(fmt.Sprintf("host: %s: lengths %d and %d differ", op, len(a), len(b)))
	}
}

func hostReLU(v vec) { ops.ReLU(v) }

func hostAdd(dst, x vec) { sameLen("Add", dst, x); ops.Axpy(dst, 1, x) }

func hostAxpy(dst vec, a float32, x vec) { sameLen("Axpy", dst, x); ops.Axpy(dst, a, x) }

// hostMul multiplies dst by x element by element.
func hostMul(dst, x vec) {
	sameLen("Mul", dst, x)
	for i, v := range x {
		dst[i] *= v
	}
}

func hostFill(v vec, c float32) {
	for i := range v {
		v[i] = c
	}
}

// hostSigmoid applies 1/(1+e^-v) in place.
func hostSigmoid(v vec) {
	for i, x := range v {
		v[i] = float32(1 / (1 + math.Exp(-float64(x))))
	}
}

func hostScale(v vec, a float32) {
	for i := range v {
		v[i] *= a
	}
}

func hostDot(a, b vec) float32 { sameLen("Dot", a, b); return ops.Dot(a, b) }

func hostSum(v vec) float32 {
	var s float64
	for _, x := range v {
		s += float64(x)
	}
	return float32(s)
}

// hostAddAt adds d to v at each id.
func hostAddAt(v vec, ids []int32, d float32) {
	for _, id := range ids {
		if id < 0 || int(id) >= len(v) {
			panic(fmt.Sprintf("host: AddAt: id %d out of range [0,%d)", id, len(v)))
		}
		v[id] += d
	}
}

func hostTopK(v vec, k int) []int32 { return TopK(make([]int32, 0, max(0, min(k, len(v)))), v, k) }

func hostAbove(v vec, t float32) []int32 { return ops.Above(nil, v, t) }

// hostUnion merges two ascending id lists.
func hostUnion(a, b []int32) []int32 {
	out := make([]int32, 0, len(a)+len(b))
	out = append(append(out, a...), b...)
	slices.Sort(out)
	return slices.Compact(out)
}

// hostRecall is the share of truth found in pred (1 when truth is empty);
// both ascending.
func hostRecall(pred, truth []int32) float32 {
	if len(truth) == 0 {
		return 1
	}
	hit, i := 0, 0
	for _, t := range truth {
		for i < len(pred) && pred[i] < t {
			i++
		}
		if i < len(pred) && pred[i] == t {
			hit++
		}
	}
	return float32(hit) / float32(len(truth))
}

func hostNewVec(n int) vec { return make(vec, n) }

// TopK appends to dst, in ascending order, the ids of the k largest scores;
// ties go to the lower id and NaN counts as the lowest score. It finds the
// k-th largest by a radix select on the scores' bits: a few branch-light
// passes, no sort.
func TopK(dst []int32, scores []float32, k int) []int32 {
	n := len(scores)
	if k >= n {
		for i := range n {
			dst = append(dst, int32(i))
		}
		return dst
	}
	if k <= 0 {
		return dst
	}
	kp := keyPool.Get().(*[]uint32)
	keys := (*kp)[:0]
	for _, v := range scores {
		keys = append(keys, orderKey(v))
	}
	t := kthLargestKey(keys, k)
	// Every key above t is in; ties at t fill the rest, lowest ids first.
	above := 0
	for _, x := range keys {
		if x > t {
			above++
		}
	}
	ties := k - above
	for i, x := range keys {
		if x > t || (x == t && ties > 0) {
			if x == t {
				ties--
			}
			dst = append(dst, int32(i))
		}
	}
	*kp = keys
	keyPool.Put(kp)
	return dst
}

var keyPool = sync.Pool{New: func() any { return new([]uint32) }}

// orderKey maps a float32 to a uint32 of the same order; NaN maps to 0,
// below every other score.
func orderKey(v float32) uint32 {
	if v != v {
		return 0
	}
	u := math.Float32bits(v)
	if u>>31 != 0 {
		return ^u
	}
	return u | 1<<31
}

// kthLargestKey is the k-th largest key (1-based), found a byte at a time
// from the top.
func kthLargestKey(keys []uint32, k int) uint32 {
	var prefix, mask uint32
	for shift := 24; shift >= 0; shift -= 8 {
		var hist [256]int
		for _, x := range keys {
			if x&mask == prefix {
				hist[x>>shift&255]++
			}
		}
		for b := 255; b >= 0; b-- {
			if k <= hist[b] {
				prefix |= uint32(b) << shift
				mask |= 255 << shift
				break
			}
			k -= hist[b]
		}
	}
	return prefix
}

func growVec(b vec, n int) vec {
	if cap(b) < n {
		return make(vec, n)
	}
	return b[:n]
}

func (s *layerState) handle() hostLayer {
	return hostLayer{Index: s.l.Index, Expert: s.l.Expert, NEmbd: s.l.NEmbd, NFF: s.l.NFF, s: s}
}
