package cuda

import (
	"fmt"

	"github.com/pinfer/pinfer/ops"
)

// Residency is what a backend keeps in GPU memory: dense matrices whole, for
// ops.MatMul, and per sparse FFN the rows of its hot neurons. It is plain
// data so that the code which decides it (placement, the graph) needs no
// cgo and the backend needs no graph.
type Residency struct {
	Dense []*ops.Matrix
	FFNs  []HotFFN
}

// HotFFN is one sparse FFN's share of the GPU. ops.FFN's Gate pointer is
// the key the executor's calls are matched by.
type HotFFN struct {
	Gate, Up  *ops.Matrix // neuron-major; Up nil for a non-gated FFN
	Down      *ops.Matrix // neuron-major (ffn_down_t)
	GateBias  []float32   // nil if none
	Act       string
	Threshold float32
	Hot       []int32 // ascending neuron ids held on the GPU
}

// Bytes is the device memory r takes in the kernels' layout.
func (r *Residency) Bytes() (int64, error) {
	var n int64
	add := func(m *ops.Matrix, rows int) error {
		if m == nil {
			return nil
		}
		l, err := NewLayout(m.Type, rows, m.Cols)
		if err != nil {
			return err
		}
		n += int64(l.Bytes())
		return nil
	}
	for _, m := range r.Dense {
		if err := add(m, m.Rows); err != nil {
			return 0, err
		}
	}
	for _, f := range r.FFNs {
		for _, m := range []*ops.Matrix{f.Gate, f.Up, f.Down} {
			if err := add(m, len(f.Hot)); err != nil {
				return 0, err
			}
		}
	}
	return n, nil
}

// Check validates r before anything is uploaded.
func (r *Residency) Check() error {
	for _, f := range r.FFNs {
		if f.Gate == nil || f.Down == nil {
			return fmt.Errorf("cuda: a hot FFN needs its gate and down_t matrices")
		}
		nff := f.Gate.Rows
		if f.Down.Rows != nff || (f.Up != nil && (f.Up.Rows != nff || f.Up.Cols != f.Gate.Cols)) {
			return fmt.Errorf("cuda: hot FFN shapes disagree: gate %dx%d, down_t %dx%d", nff, f.Gate.Cols, f.Down.Rows, f.Down.Cols)
		}
		if f.GateBias != nil && len(f.GateBias) != nff {
			return fmt.Errorf("cuda: gate bias of %d for %d neurons", len(f.GateBias), nff)
		}
		if _, ok := actCodes[f.Act]; !ok {
			return fmt.Errorf("cuda: FFN activation %q has no kernel", f.Act)
		}
		prev := int32(-1)
		for _, id := range f.Hot {
			if id <= prev || int(id) >= nff {
				return fmt.Errorf("cuda: hot neuron ids must ascend within [0,%d): %d after %d", nff, id, prev)
			}
			prev = id
		}
	}
	return nil
}

// actCodes are the activations the ffn_act kernel implements, by its code.
var actCodes = map[string]int{"relu": 0, "fatrelu": 1, "drelu": 2, "silu": 3, "gelu": 4}
