package ops

import (
	"sync"

	"github.com/pinfer/pinfer/ops/avx2"
)

// The hot loops run on ops/avx2's kernels when the CPU has AVX2, FMA and
// F16C (AVX-512 with VNNI where present): whole index lists go to the
// assembly in one call. For q4_0 weights the activations are quantized to
// q8_0 first, as GGML does, so the fast path differs from the portable one
// by that rounding; q8_0 weights meet f32 activations, widened in registers.
// Tests switch Fast off to check the portable kernels, which define each
// op's meaning.

// Fast selects the vector kernels.
var Fast = avx2.Available

// Backend names the CPU kernels in use, for reports.
func Backend() string {
	switch {
	case Fast && avx2.AVX512:
		return "CPU (AVX-512)"
	case Fast:
		return "CPU (AVX2)"
	}
	return "CPU (Go)"
}

// Sum adds x up with the fastest kernel: the streaming-read probe.
func Sum(x []float32) float32 { return avx2.Sum(x) }

// SumRuns is Sum read as four runs side by side (avx2.SumRuns), which some
// cores stream faster than one run: the other half of the probe.
func SumRuns(x []float32) float32 { return avx2.SumRuns(x) }

// fastType: q8_0 weights meet f32 activations (GatherQ8_0F32): rounding
// the activations to q8_0 as well moved the Shakespeare fixture's greedy ids
// off the f32 file's within 16 tokens.
func fastType(t DType) bool {
	return Fast && (t == F32 || t == F16 || t == Q4_0 || t == Q8_0)
}

// quantized reports whether the fast kernels want q8_0 activations.
func quantized(t DType) bool { return t == Q4_0 }

// actsPool recycles quantized activations across calls.
var actsPool = sync.Pool{New: func() any { return new(avx2.Acts) }}

// quantizeX returns x's T rows prepared for quantized weights, else nil;
// put it back with releaseX.
func quantizeX(t DType, x []float32, cols, T int) *avx2.Acts {
	if !quantized(t) {
		return nil
	}
	a := actsPool.Get().(*avx2.Acts)
	a.Set(x, cols, T)
	return a
}

func releaseX(a *avx2.Acts) {
	if a != nil {
		actsPool.Put(a)
	}
}

// gatherT sets out[t*ldo+k] = row(ids[k]) · x_t for the T tokens of x (or
// of a, for quantized types). ldo is unused when T == 1.
func gatherT(t DType, out []float32, ldo int, w []byte, cols int, ids []int32, x []float32, T int, a *avx2.Acts) {
	if t == Q4_0 {
		avx2.GatherQ4_0Acts(out, max(ldo, len(ids)), w, ids, a)
		return
	}
	n := len(ids)
	for i := 0; i < T; i++ {
		o, xt := out[i*ldo:][:n], x[i*cols:(i+1)*cols]
		switch t {
		case F32:
			avx2.GatherF32(o, w, cols, ids, xt)
		case F16:
			avx2.GatherF16(o, w, cols, ids, xt)
		case Q8_0:
			avx2.GatherQ8_0F32(o, w, cols, ids, xt)
		}
	}
}

// axpyRows adds Σ coef[k]·row(rows[k]) to y.
func axpyRows(t DType, y []float32, w []byte, cols int, rows []int32, coef []float32, cached bool) {
	switch t {
	case F32:
		avx2.AxpyF32(y, w, cols, rows, coef)
	case F16:
		avx2.AxpyF16(y, w, cols, rows, coef)
	case Q8_0:
		avx2.AxpyQ8_0(y, w, cols, rows, coef)
	case Q4_0:
		if cached {
			avx2.AxpyQ4_0Cached(y, w, cols, rows, coef)
			return
		}
		avx2.AxpyQ4_0(y, w, cols, rows, coef)
	}
}

// matMulFast splits the rows of ms, one matrix after another, over the
// pool in one call; the matrices share x, its type and its width. Each worker
// hands its whole range to the kernels: q4_0 shares each weight load among
// several tokens in registers (sixteen rows by eight tokens, or four by
// four); for the other types, with several tokens, it walks its rows in
// tiles small enough to stay in cache while every token uses them, so the
// weights stream from memory once.
func matMulFast(p *Pool, outs [][]float32, ms []*Matrix, x []float32, T int) {
	m := ms[0]
	a := quantizeX(m.Type, x, m.Cols, T)
	defer releaseX(a)
	tile := 0 // the whole piece
	if T > 1 && m.Type != Q4_0 {
		tile = max(1, (64<<10)/m.rowBytes())
	}
	j := matJobs.Get().(*matJob)
	j.parts = j.parts[:0]
	rows := 0
	for k, m := range ms {
		j.parts = append(j.parts, matPart{m: m, out: outs[k], first: rows})
		rows += m.Rows
		if m.packed(false) != nil && a != nil {
			a.PrepPacked()
		}
	}
	j.x, j.T, j.a, j.tile = x, T, a, tile
	p.Share(rows, pieces(p.Threads(), T), j)
	clear(j.parts)
	*j = matJob{parts: j.parts[:0]}
	matJobs.Put(j)
}

// pieces is how many pieces Pool.Share cuts a mat-vec or an FFN of T
// tokens into. Several tokens: four per thread, enough that a late
// thread's share is small, few enough that each piece still hands its
// kernel a long list of rows. One token: one per thread, so that each
// thread reads one contiguous range; in an in-process A/B of 7B decode it
// was faster in 13 of 14 pairs, equal in the other (ops/avx2/NOTES.md),
// and Share still lets one thread take both when the other is late.
func pieces(threads, T int) int {
	if T == 1 {
		return threads
	}
	return 4 * threads
}

// matJob carries a matMulFast call to the workers; pooled, with its parts,
// so that a call allocates nothing.
type matJob struct {
	parts   []matPart
	x       []float32
	T, tile int
	a       *avx2.Acts
}

// matPart is one matrix of a call: its rows are the call's rows first on.
type matPart struct {
	m     *Matrix
	out   []float32
	first int
}

var matJobs = sync.Pool{New: func() any { return new(matJob) }}

func (j *matJob) Run(lo, hi int) {
	for _, pt := range j.parts {
		m := pt.m
		r0, r1 := max(lo-pt.first, 0), min(hi-pt.first, m.Rows)
		if p8 := m.packed(false); p8 != nil && j.a != nil {
			r0 = packedRows(m, p8, pt.out, m.Rows, 0, r0, r1, j.a)
		}
		for r0 < r1 {
			e := r1
			if j.tile > 0 {
				e = min(r1, r0+j.tile)
			}
			gatherT(m.Type, pt.out[r0:], m.Rows, m.Data, m.Cols, avx2.Iota(e)[r0:], j.x, j.T, j.a)
			r0 = e
		}
	}
}

func fastAvailable() bool { return avx2.Available }
