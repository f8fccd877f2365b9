package ops

import (
	"sync"

	"github.com/pinfer/pinfer/ops/avx2"
)

// The hot loops run on ops/avx2's kernels when the CPU has AVX2, FMA and
// F16C: whole index lists go to the assembly in one call. For q8_0 and q4_0
// weights the activations are quantized to q8_0 first, as GGML does, so the
// fast path differs from the portable one by that rounding. Tests switch
// Fast off to check the portable kernels, which define each op's meaning.

// Fast selects the vector kernels.
var Fast = avx2.Available

// Backend names the CPU kernels in use, for reports.
func Backend() string {
	if Fast {
		return "CPU (AVX2)"
	}
	return "CPU (Go)"
}

// Sum adds x up with the fastest kernel: the streaming-read probe.
func Sum(x []float32) float32 { return avx2.Sum(x) }

// fastType: q8_0 weights stay on the portable path for now. Their vector
// kernel rounds the activations to q8_0 too, and that second rounding moves
// the Shakespeare fixture's greedy ids off the f32 file's within 16 tokens;
// a q8_0 × f32 kernel is the fix.
func fastType(t DType) bool {
	return Fast && (t == F32 || t == F16 || t == Q4_0)
}

// quantized reports whether the fast kernels want q8_0 activations.
func quantized(t DType) bool { return t == Q8_0 || t == Q4_0 }

// q8Bufs recycles activation quantization buffers across calls.
var q8Bufs = sync.Pool{New: func() any { return new([]byte) }}

// quantizeX returns x as q8_0 blocks for quantized weights, else nil.
func quantizeX(t DType, x []float32, cols, T int) ([]byte, func()) {
	if !quantized(t) {
		return nil, func() {}
	}
	bp := q8Bufs.Get().(*[]byte)
	rb := cols / 32 * 34
	if cap(*bp) < rb*T {
		*bp = make([]byte, rb*T)
	}
	xq := (*bp)[:rb*T]
	for i := 0; i < T; i++ {
		avx2.QuantizeQ8(xq[i*rb:(i+1)*rb], x[i*cols:(i+1)*cols])
	}
	return xq, func() { q8Bufs.Put(bp) }
}

// gather sets out[k] = row(rows[k]) · x (rows nil: rows 0..len(out)-1 of w).
// xq is x quantized, for quantized types.
func gather(t DType, out []float32, w []byte, cols int, rows []int32, x []float32, xq []byte) {
	switch t {
	case F32:
		avx2.GatherF32(out, w, cols, rows, x)
	case F16:
		avx2.GatherF16(out, w, cols, rows, x)
	case Q8_0:
		avx2.GatherQ8_0(out, w, cols, rows, xq)
	case Q4_0:
		avx2.GatherQ4_0(out, w, cols, rows, xq)
	}
}

// axpyRows adds Σ coef[k]·row(rows[k]) to y.
func axpyRows(t DType, y []float32, w []byte, cols int, rows []int32, coef []float32) {
	switch t {
	case F32:
		avx2.AxpyF32(y, w, cols, rows, coef)
	case F16:
		avx2.AxpyF16(y, w, cols, rows, coef)
	case Q8_0:
		avx2.AxpyQ8_0(y, w, cols, rows, coef)
	case Q4_0:
		avx2.AxpyQ4_0(y, w, cols, rows, coef)
	}
}

// matMulFast splits the rows over the pool. With several tokens, each
// worker walks its rows in tiles small enough to stay in cache while every
// token is multiplied by them, so the weights stream from memory once.
func matMulFast(p *Pool, out []float32, m *Matrix, x []float32, T int) {
	rows, cols, rb := m.Rows, m.Cols, m.rowBytes()
	xq, done := quantizeX(m.Type, x, cols, T)
	defer done()
	qb := cols / 32 * 34
	tile := max(1, (64<<10)/rb)
	p.Run(rows, func(lo, hi int) {
		for r0 := lo; r0 < hi; r0 += tile {
			r1 := min(hi, r0+tile)
			w := m.Data[r0*rb : r1*rb]
			for t := 0; t < T; t++ {
				var xt []float32
				var xqt []byte
				if xq != nil {
					xqt = xq[t*qb : (t+1)*qb]
				} else {
					xt = x[t*cols : (t+1)*cols]
				}
				gather(m.Type, out[t*rows+r0:t*rows+r1], w, cols, nil, xt, xqt)
			}
		}
	})
}

func fastAvailable() bool { return avx2.Available }
