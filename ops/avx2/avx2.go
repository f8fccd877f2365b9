// Package avx2 holds the CPU kernels of the hot loops: mat-vec over a gathered
// set of rows, sparse axpy over rows, dot, for f32, f16, q8_0 and q4_0
// weights in GGML layouts. On amd64 they are AVX2+FMA+F16C assembly generated
// by ../../_asm with avo; where the CPU has AVX-512 (F, BW, VL, VBMI, VNNI)
// the quantized kernels, the several-token GatherQ4_0Acts
// and the q8_0 × f32 gather run hand-written AVX-512 instead
// (kernels512_amd64.s, see AVX512); elsewhere, with -tags purego, or on a
// CPU without those extensions, the same API runs in plain Go.
//
// Weights are raw row bytes: f32 cols*4, f16 cols*2, q8_0 cols/32*34 (f16 d,
// 32 int8), q4_0 cols/32*18 (f16 d, 16 bytes: element j<16 is the low nibble
// of byte j, j+16 the high nibble, value (q-8)*d). A nil rows list means rows
// 0..n-1. Misuse (bad lengths, row ids out of range) is a programmer error
// and panics with the function's name.
package avx2

//go:generate go run -C ../../_asm . -out ../ops/avx2/kernels_amd64.s -stubs ../ops/avx2/kernels_amd64.go -pkg avx2

import (
	"fmt"
	"math"
	"sync"
	"unsafe"

	"github.com/pinfer/pinfer/ops/half"
)

// Available reports whether the assembly kernels run: amd64 with AVX2, FMA3
// and F16C, built without purego. The functions below work either way; this
// tells callers whether they get the fast path.
var Available bool

const (
	q8Block = 34
	q4Block = 18
)

// GatherF32 sets out[k] = row(rows[k]) · x for f32 rows of cols elements.
func GatherF32(out []float32, w []byte, cols int, rows []int32, x []float32) {
	gatherPlain("GatherF32", 4, out, w, cols, rows, x)
}

// GatherF16 sets out[k] = row(rows[k]) · x for f16 rows of cols elements.
func GatherF16(out []float32, w []byte, cols int, rows []int32, x []float32) {
	gatherPlain("GatherF16", 2, out, w, cols, rows, x)
}

// gatherPlain is GatherF32 and GatherF16 (by elem, the bytes per element).
func gatherPlain(name string, elem int, out []float32, w []byte, cols int, rows []int32, x []float32) {
	ids := checkGather(name, out, w, cols, cols*elem, rows, len(x), cols)
	if ids == nil {
		return
	}
	gatherRows(elem, out, w, cols, cols*elem, ids, x)
}

// gatherRows runs the gather over rows stride bytes apart: the assembly
// takes whole groups of 8 columns, Go the rest.
func gatherRows(elem int, out []float32, w []byte, cols, stride int, ids []int32, x []float32) {
	body := cols &^ 7
	switch {
	case !Available:
		body = 0
		clear(out)
	case elem == 4:
		gatherF32(&out[0], unsafe.SliceData(w), stride, &ids[0], len(out), unsafe.SliceData(x), body)
	default:
		gatherF16(&out[0], unsafe.SliceData(w), stride, &ids[0], len(out), unsafe.SliceData(x), body)
	}
	if body == cols {
		return
	}
	for k, r := range ids {
		tail := w[int(r)*stride:][body*elem : cols*elem]
		if elem == 4 {
			out[k] += dotF32(tail, x[body:])
		} else {
			out[k] += dotF16(tail, x[body:])
		}
	}
}

// GatherF32Strided sets out[k] = w[k*stride:][:cols] · x for k <
// len(out): rows of a strided view (stride >= cols elements), such as one
// attention head's slice of every cached key.
func GatherF32Strided(out, w []float32, stride, cols int, x []float32) {
	gatherStrided("GatherF32Strided", 4, out, bytesOf(w), stride, cols, x)
}

// GatherF16Strided is GatherF32Strided over f16 values.
func GatherF16Strided(out []float32, w []uint16, stride, cols int, x []float32) {
	gatherStrided("GatherF16Strided", 2, out, bytesOf(w), stride, cols, x)
}

// AxpyF32Strided adds Σ_k coef[k]·w[k*stride:][:len(y)] to y, over the
// same kind of view.
func AxpyF32Strided(y, w []float32, stride int, coef []float32) {
	axpyStrided("AxpyF32Strided", 4, y, bytesOf(w), stride, coef)
}

// AxpyF16Strided is AxpyF32Strided over f16 values.
func AxpyF16Strided(y []float32, w []uint16, stride int, coef []float32) {
	axpyStrided("AxpyF16Strided", 2, y, bytesOf(w), stride, coef)
}

// GatherF32Strided4 is GatherF32Strided for four vectors at once: x holds
// them back to back (4·cols values), and out[q·n+k] gets row k · x_q, with
// n = len(out)/4. A prompt's rows then read a head's keys once for four.
func GatherF32Strided4(out, w []float32, stride, cols int, x []float32) {
	dotShort4("GatherF32Strided4", 4, out, bytesOf(w), stride, cols, x)
}

// GatherF16Strided4 is GatherF32Strided4 over f16 values.
func GatherF16Strided4(out []float32, w []uint16, stride, cols int, x []float32) {
	dotShort4("GatherF16Strided4", 2, out, bytesOf(w), stride, cols, x)
}

// AxpyF32Strided4 is AxpyF32Strided for four vectors at once: y holds them
// back to back (4·cols values), and y_q gains Σ_k coef[q·n+k]·row k, with
// n = len(coef)/4.
func AxpyF32Strided4(y, w []float32, stride int, coef []float32) {
	axpyShort4("AxpyF32Strided4", 4, y, bytesOf(w), stride, coef)
}

// AxpyF16Strided4 is AxpyF32Strided4 over f16 values.
func AxpyF16Strided4(y []float32, w []uint16, stride int, coef []float32) {
	axpyShort4("AxpyF16Strided4", 2, y, bytesOf(w), stride, coef)
}

// dotShort4 and axpyShort4 are the four-vector forms over w's bytes, elem
// bytes a value: on AVX-512 four rows by four vectors a kernel call, a last
// few rows being the four last rows again; elsewhere, and below four rows,
// each vector through the general kernels. One row of a prompt, or a
// decode step, takes those too: from memory, where a long context's decode
// reads its cache, they read 17.5-19 GB/s on one thread against 12-15 for
// one-row forms of these kernels, whose loads ran ahead of their
// prefetches (ops/avx2/NOTES.md).
func dotShort4(name string, elem int, out []float32, w []byte, stride, cols int, x []float32) {
	n := len(out) / 4
	if len(out) != 4*n || len(x) != 4*cols {
		panic(fmt.Sprintf("avx2.%s: out has %d values, x %d, cols=%d: want 4·n and 4·cols", name, len(out), len(x), cols))
	}
	if !AVX512 || n < 4 || cols == 0 {
		for q := range 4 {
			gatherStrided(name, elem, out[q*n:][:n], w, stride, cols, x[q*cols:][:cols])
		}
		return
	}
	checkStrided(name, len(w)/elem, stride, cols, n)
	n4, tail := n&^3, uint64(1)<<(cols%16)-1
	call := func(k, m int) {
		if elem == 4 {
			dotRowsF32x4(&out[k], n*4, &w[k*stride*elem], stride*elem, m, &x[0], cols*4, cols/16*64, tail)
		} else {
			dotRowsF16x4(&out[k], n*4, &w[k*stride*elem], stride*elem, m, &x[0], cols*4, cols/16*32, tail)
		}
	}
	call(0, n4)
	if last := n - 4; last > n4-4 {
		call(last, 4)
	}
}

func axpyShort4(name string, elem int, y []float32, w []byte, stride int, coef []float32) {
	cols, n := len(y)/4, len(coef)/4
	if len(y) != 4*cols || len(coef) != 4*n {
		panic(fmt.Sprintf("avx2.%s: y has %d values, coef %d: want multiples of 4", name, len(y), len(coef)))
	}
	if !AVX512 || cols == 0 || n == 0 {
		for q := range 4 {
			axpyStrided(name, elem, y[q*cols:][:cols], w, stride, coef[q*n:][:n])
		}
		return
	}
	checkStrided(name, len(w)/elem, stride, cols, n)
	for c := 0; c < cols; c += 64 {
		if elem == 4 {
			axpyRowsF32x4(&y[c], cols*4, &w[c*elem], stride*elem, n, &coef[0], n*4, colMasks(cols-c))
		} else {
			axpyRowsF16x4(&y[c], cols*4, &w[c*elem], stride*elem, n, &coef[0], n*4, colMasks(cols-c))
		}
	}
}

// colMasks are the lane masks of the four 16-value chunks of a block of
// min(left, 64) columns, low chunk first.
func colMasks(left int) uint64 {
	var masks uint64
	for i := range 4 {
		lanes := min(max(left-16*i, 0), 16)
		masks |= (uint64(1)<<lanes - 1) << (16 * i)
	}
	return masks
}

// gatherStrided and axpyStrided are the strided kernels through the
// general row kernels, which take any rows.
func gatherStrided(name string, elem int, out []float32, w []byte, stride, cols int, x []float32) {
	checkStrided(name, len(w)/elem, stride, cols, len(out))
	if len(x) != cols {
		panic(fmt.Sprintf("avx2.%s: x has length %d, want cols=%d", name, len(x), cols))
	}
	if cols == 0 {
		clear(out)
		return
	}
	if len(out) > 0 {
		gatherRows(elem, out, w, cols, stride*elem, Iota(len(out)), x)
	}
}

func axpyStrided(name string, elem int, y []float32, w []byte, stride int, coef []float32) {
	checkStrided(name, len(w)/elem, stride, len(y), len(coef))
	if len(y) > 0 && len(coef) > 0 {
		axpyRows(elem, y, w, len(y), stride*elem, Iota(len(coef)), coef)
	}
}

// checkStrided checks that w holds n rows of cols elements, stride apart.
func checkStrided(fn string, wlen, stride, cols, n int) {
	if cols < 0 || stride < cols {
		panic(fmt.Sprintf("avx2.%s: cols=%d, stride=%d: want 0 <= cols <= stride", fn, cols, stride))
	}
	if n > 0 && (n-1)*stride+cols > wlen {
		panic(fmt.Sprintf("avx2.%s: %d rows of %d, %d apart, need %d values, w has %d", fn, n, cols, stride, (n-1)*stride+cols, wlen))
	}
}

func bytesOf[T any](w []T) []byte {
	var z T
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(w))), len(w)*int(unsafe.Sizeof(z)))
}

// EncodeF16 writes src in IEEE binary16 to dst (len(dst) >= len(src)),
// rounding to nearest even, as half.Encode does.
func EncodeF16(dst []uint16, src []float32) {
	if len(dst) < len(src) {
		panic(fmt.Sprintf("avx2.EncodeF16: dst has %d values, src %d", len(dst), len(src)))
	}
	body := len(src) &^ 7
	if !Available {
		body = 0
	}
	if body > 0 {
		f32ToF16(&dst[0], &src[0], body)
	}
	for i := body; i < len(src); i++ {
		dst[i] = half.Encode(src[i])
	}
}

// GatherQ8_0 sets out[k] = row(rows[k]) · x for q8_0 rows, with x given
// quantized by QuantizeQ8 (cols/32*34 bytes).
func GatherQ8_0(out []float32, w []byte, cols int, rows []int32, xq []byte) {
	checkBlocks("GatherQ8_0", cols)
	ids := checkGather("GatherQ8_0", out, w, cols, cols/32*q8Block, rows, len(xq), cols/32*q8Block)
	if ids == nil {
		return
	}
	if !Available {
		goGatherQ8(out, w, cols/32, ids, xq)
		return
	}
	if AVX512 {
		gatherQ8vnni(out, w, cols/32, ids, xq)
		return
	}
	gatherQ8_0(&out[0], unsafe.SliceData(w), cols/32*q8Block, &ids[0], len(out), unsafe.SliceData(xq), cols/32, scattered(ids))
}

// GatherQ4_0 sets out[k] = row(rows[k]) · x for q4_0 rows, with x given
// quantized by QuantizeQ8 (cols/32*34 bytes).
func GatherQ4_0(out []float32, w []byte, cols int, rows []int32, xq []byte) {
	checkBlocks("GatherQ4_0", cols)
	ids := checkGather("GatherQ4_0", out, w, cols, cols/32*q4Block, rows, len(xq), cols/32*q8Block)
	if ids == nil {
		return
	}
	if !Available {
		goGatherQ4(out, w, cols/32, ids, xq)
		return
	}
	nblk := cols / 32
	xs := q4Scratch.Get().(*[]byte)
	if AVX512 {
		*xs = grow(*xs, xsBytes(nblk))
		prepare(*xs, xq, nblk)
		gatherPrepared(out, w, nblk*q4Block, ids, *xs, nblk)
	} else {
		*xs = grow(*xs, (nblk+1)/2*128)
		gatherQ4_0(&out[0], unsafe.SliceData(w), nblk*q4Block, &ids[0], len(out), unsafe.SliceData(xq), nblk, &(*xs)[0], scattered(ids))
	}
	q4Scratch.Put(xs)
}

// gatherQ4Tokens is GatherQ4_0Acts on AVX2, for four tokens or more: each
// token's x is prepared once, then a tile of rows small enough to stay in
// L2 meets every group of four tokens (gatherQ4x4, which unpacks each
// weight block once for the four). A last group of fewer tokens is the
// last four tokens again, and an odd last row of a tile the last two rows
// again: the outputs they share come out the same.
func gatherQ4Tokens(out []float32, ldo int, w []byte, ids []int32, a *Acts, nblk int) {
	T, n := a.T, len(ids)
	xsb, rb, stride := nblk/2*128, nblk*q8Block, nblk*q4Block
	buf := q4Scratch.Get().(*[]byte)
	*buf = grow(*buf, T*xsb)
	xs := *buf
	for t := 0; t < T; t++ {
		prepQ4x2(&xs[t*xsb], &a.Q[t*rb], nblk)
	}
	call := func(r0, m, t0 int) {
		gatherQ4x4(&out[t0*ldo+r0], ldo, unsafe.SliceData(w), stride, &ids[r0], m, &xs[t0*xsb], xsb, nblk)
	}
	tile := max(2, (128<<10)/stride&^1)
	for r0 := 0; r0 < n; r0 += tile {
		r1 := min(n, r0+tile)
		for t := 0; t < T; t += 4 {
			t0 := min(t, T-4)
			if m := (r1 - r0) &^ 1; m > 0 {
				call(r0, m, t0)
			}
			if (r1-r0)%2 != 0 {
				call(r1-2, 2, t0)
			}
		}
	}
	q4Scratch.Put(buf)
}

// q4Scratch holds the per-call x tables of the q4_0 gather, pooled so that
// steady-state calls allocate nothing.
var q4Scratch = sync.Pool{New: func() any { return new([]byte) }}

// AxpyF32 adds Σ_k coef[k]*row(rows[k]) to y (len cols); nil rows means
// rows 0..len(coef)-1.
func AxpyF32(y []float32, w []byte, cols int, rows []int32, coef []float32) {
	axpyPlain("AxpyF32", 4, y, w, cols, rows, coef)
}

// AxpyF16 is AxpyF32 over f16 rows.
func AxpyF16(y []float32, w []byte, cols int, rows []int32, coef []float32) {
	axpyPlain("AxpyF16", 2, y, w, cols, rows, coef)
}

// axpyPlain is AxpyF32 and AxpyF16, as gatherPlain is their gathers.
func axpyPlain(name string, elem int, y []float32, w []byte, cols int, rows []int32, coef []float32) {
	ids := checkAxpy(name, y, w, cols, cols*elem, rows, coef)
	if ids == nil {
		return
	}
	axpyRows(elem, y, w, cols, cols*elem, ids, coef)
}

// axpyRows is gatherRows' axpy.
func axpyRows(elem int, y []float32, w []byte, cols, stride int, ids []int32, coef []float32) {
	body := cols &^ 7
	switch {
	case !Available:
		body = 0
	case elem == 4:
		axpyF32(&y[0], unsafe.SliceData(w), stride, &ids[0], len(ids), &coef[0], body)
	default:
		axpyF16(&y[0], unsafe.SliceData(w), stride, &ids[0], len(ids), &coef[0], body)
	}
	if body == cols {
		return
	}
	for k, r := range ids {
		tail := w[int(r)*stride:][body*elem : cols*elem]
		if elem == 4 {
			axpyRowF32(y[body:], tail, coef[k])
		} else {
			axpyRowF16(y[body:], tail, coef[k])
		}
	}
}

// AxpyQ8_0 is AxpyF32 over q8_0 rows.
func AxpyQ8_0(y []float32, w []byte, cols int, rows []int32, coef []float32) {
	checkBlocks("AxpyQ8_0", cols)
	ids := checkAxpy("AxpyQ8_0", y, w, cols, cols/32*q8Block, rows, coef)
	if ids == nil {
		return
	}
	if !Available {
		goAxpyQ8(y, w, cols/32, ids, coef)
		return
	}
	axpyQ8_0(&y[0], unsafe.SliceData(w), cols/32*q8Block, &ids[0], len(ids), &coef[0], cols/32)
}

// int8Axpy selects the int8 kernels of the q4_0 axpy, AVX-512's and AVX2's;
// BenchmarkAxpyQ4Int8 clears it to measure the f32 kernel beside them.
// int16Rows selects AVX-512's sixteen-row form (axpyQ4i16) where a row's
// blocks come in sixteens: one thread, hot 22-27 against 21-23 GB/s; two
// threads over all rows 1.5% faster in the host's slow state and 15% in
// its fast one, where decode gains 1-2.5% (ops/avx2/NOTES.md). The tests
// clear it to check axpyQ4i8, which takes the rows after the last whole
// sixteen.
var int8Axpy, int16Rows = true, true

// i8Rec is the record area both int8 kernels need for nblk blocks:
// axpyQ4i16's (2560 + 448 per sixteen blocks and one more), which holds
// axpyQ4i8's (16 per block).
func i8Rec(nblk int) int { return 2560 + 448*(nblk/16+1) }

// AxpyQ4_0 is AxpyF32 over q4_0 rows. With AVX-512 the coefficients of
// each eight rows (axpyQ4i8; sixteen, axpyQ4i16, when int16Rows is set and
// a row's blocks come in sixteens), and with AVX2 those of each sixteen
// neighbouring rows (axpyQ4i16a), are rounded to int8 per block with one
// scale, as precise as the q8_0 activations of the mat-vecs (a q8_0 block
// has 32).
func AxpyQ4_0(y []float32, w []byte, cols int, rows []int32, coef []float32) {
	checkBlocks("AxpyQ4_0", cols)
	ids := checkAxpy("AxpyQ4_0", y, w, cols, cols/32*q4Block, rows, coef)
	if ids == nil {
		return
	}
	if !Available {
		goAxpyQ4(y, w, cols/32, ids, coef)
		return
	}
	nblk, stride := cols/32, cols/32*q4Block
	if AVX512 {
		// Whole groups of sixteen rows, then of eight, with int8
		// coefficients, the rest in f32.
		n16, n8 := 0, 0
		if int8Axpy {
			if int16Rows && nblk%16 == 0 {
				n16 = len(ids) &^ 15
			}
			n8 = (len(ids) - n16) &^ 7
		}
		if n16+n8 > 0 {
			rec := q4Scratch.Get().(*[]byte)
			*rec = grow(*rec, i8Rec(nblk))
			if n16 > 0 {
				axpyQ4i16(&y[0], unsafe.SliceData(w), stride, &ids[0], n16, &coef[0], nblk, &(*rec)[0])
			}
			if n8 > 0 {
				axpyQ4i8(&y[0], unsafe.SliceData(w), stride, &ids[n16], n8, &coef[n16], nblk, &(*rec)[0])
			}
			q4Scratch.Put(rec)
		}
		if k := n16 + n8; k < len(ids) {
			axpyQ4v(&y[0], unsafe.SliceData(w), stride, &ids[k], len(ids)-k, &coef[k], nblk)
		}
		return
	}
	// AVX2: for a run of neighbouring rows (a dense FFN's down projection)
	// whole sixteens with int8 coefficients (axpyQ4i16a), the rest in f32.
	// Scattered rows stay in f32: there the int8 kernel, whose phases
	// read each sixteen rows in turn, lost from memory (ops/avx2/NOTES.md).
	n16 := 0
	if int8Axpy && scattered(ids) == 0 {
		n16 = len(ids) &^ 15
	}
	if n16 > 0 {
		rec := q4Scratch.Get().(*[]byte)
		*rec = grow(*rec, 256+64*nblk)
		axpyQ4i16a(&y[0], unsafe.SliceData(w), stride, &ids[0], n16, &coef[0], nblk, &(*rec)[0])
		q4Scratch.Put(rec)
	}
	if n16 < len(ids) {
		axpyQ4_0(&y[0], unsafe.SliceData(w), stride, &ids[n16], len(ids)-n16, &coef[n16], nblk)
	}
}

// Dot returns a · b; the lengths must match.
func Dot(a, b []float32) float32 {
	if len(a) != len(b) {
		panic(fmt.Sprintf("avx2.Dot: len(a)=%d != len(b)=%d", len(a), len(b)))
	}
	body := len(a) &^ 7
	if !Available || body == 0 {
		return dotF32s(a, b)
	}
	return dot(&a[0], &b[0], body) + dotF32s(a[body:], b[body:])
}

// SumSq64 returns Σ x[i]² accumulated in float64, as RMSNorm wants it.
func SumSq64(x []float32) float64 {
	body := len(x) &^ 15
	var s float64
	if Available && body > 0 {
		s = sumSq64(&x[0], body)
	} else {
		body = 0
	}
	for _, v := range x[body:] {
		s += float64(v) * float64(v)
	}
	return s
}

// ScaleMul sets out[i] = x[i]·s·w[i], multiplied in that order.
func ScaleMul(out, x, w []float32, s float32) {
	if len(x) < len(out) || len(w) < len(out) {
		panic(fmt.Sprintf("avx2.ScaleMul: out has %d values, x %d, w %d", len(out), len(x), len(w)))
	}
	body := len(out) &^ 7
	if !Available {
		body = 0
	}
	if body > 0 {
		scaleMul(&out[0], &x[0], &w[0], s, body)
	}
	for i := body; i < len(out); i++ {
		out[i] = x[i] * s * w[i]
	}
}

// Add sets out[i] = a[i] + b[i]; out must not be b. It is the strided
// axpy's one row with coefficient 1, whose fused a + 1·b rounds once, as
// the sum does.
func Add(out, a, b []float32) {
	if len(a) < len(out) || len(b) < len(out) {
		panic(fmt.Sprintf("avx2.Add: out has %d values, a %d, b %d", len(out), len(a), len(b)))
	}
	copy(out, a)
	AxpyF32Strided(out, b[:len(out)], len(out), []float32{1})
}

// Sum returns the sum of a. It is the plain streaming read that the
// bandwidth of the other kernels is measured against.
func Sum(a []float32) float32 {
	body := len(a) &^ 7
	var s float32
	for _, v := range a[body:] {
		s += v
	}
	if !Available || body == 0 {
		for _, v := range a[:body] {
			s += v
		}
		return s
	}
	return sum(&a[0], body) + s
}

// QuantizeQ8 writes x as q8_0 blocks into dst (len(x)/32*34 bytes), as GGML
// does: d = amax/127 stored as f16, q = round(x/d) half away from zero.
func QuantizeQ8(dst []byte, x []float32) {
	if len(x)%32 != 0 {
		panic(fmt.Sprintf("avx2.QuantizeQ8: len(x)=%d is not a multiple of 32", len(x)))
	}
	if len(dst) != len(x)/32*q8Block {
		panic(fmt.Sprintf("avx2.QuantizeQ8: len(dst)=%d, want %d", len(dst), len(x)/32*q8Block))
	}
	quantize(dst, x)
}

// quantize is QuantizeQ8 unchecked: the AVX-512 kernel, the AVX2 one or the
// portable one, which round alike.
func quantize(dst []byte, x []float32) {
	switch {
	case len(x) == 0 || !Available:
	case AVX512:
		quantQ8v(&dst[0], &x[0], len(x)/32)
		return
	default:
		quantQ8a(&dst[0], &x[0], len(x)/32)
		return
	}
	quantizeQ8(dst, x)
}

func checkBlocks(fn string, cols int) {
	if cols%32 != 0 {
		panic(fmt.Sprintf("avx2.%s: cols=%d is not a multiple of 32", fn, cols))
	}
}

// checkGather validates a gather call and returns the row ids to read, or nil
// when there is nothing to do (out is then already set).
func checkGather(fn string, out []float32, w []byte, cols, rowBytes int, rows []int32, xLen, wantX int) []int32 {
	if cols < 0 {
		panic(fmt.Sprintf("avx2.%s: cols=%d < 0", fn, cols))
	}
	if xLen != wantX {
		panic(fmt.Sprintf("avx2.%s: x has length %d, want %d for cols=%d", fn, xLen, wantX, cols))
	}
	ids := checkRows(fn, w, rowBytes, rows, len(out))
	if cols == 0 {
		clear(out)
		return nil
	}
	if len(out) == 0 {
		return nil
	}
	return ids
}

func checkAxpy(fn string, y []float32, w []byte, cols, rowBytes int, rows []int32, coef []float32) []int32 {
	if cols < 0 {
		panic(fmt.Sprintf("avx2.%s: cols=%d < 0", fn, cols))
	}
	if len(y) != cols {
		panic(fmt.Sprintf("avx2.%s: y has length %d, want cols=%d", fn, len(y), cols))
	}
	ids := checkRows(fn, w, rowBytes, rows, len(coef))
	if cols == 0 || len(coef) == 0 {
		return nil
	}
	return ids
}

// checkRows checks n row ids (or rows 0..n-1 when rows is nil) against the
// rows that w holds.
func checkRows(fn string, w []byte, rowBytes int, rows []int32, n int) []int32 {
	have := 0
	if rowBytes > 0 {
		have = len(w) / rowBytes
	}
	if rows == nil {
		if rowBytes > 0 && n > have {
			panic(fmt.Sprintf("avx2.%s: %d rows wanted, w holds %d (%d bytes, %d per row)", fn, n, have, len(w), rowBytes))
		}
		return Iota(n)
	}
	if len(rows) != n {
		panic(fmt.Sprintf("avx2.%s: %d row ids for %d results/coefficients", fn, len(rows), n))
	}
	if rowBytes == 0 {
		return rows
	}
	for _, r := range rows {
		if r < 0 || int(r) >= have {
			panic(fmt.Sprintf("avx2.%s: row id %d out of range [0,%d)", fn, r, have))
		}
	}
	return rows
}

// ExpSum sets x[i] = e^(x[i]-m) and returns their sum: softmax's
// exponentials. With AVX-512 in float32, within 3e-7 of e^(x-m) relative
// (the sum's own rounding apart), 0 below e^-104; otherwise by math.Exp.
func ExpSum(x []float32, m float32) float32 {
	if AVX512 && Available && len(x) > 0 {
		return expSum(&x[0], len(x), m)
	}
	var sum float64
	for i, v := range x {
		e := math.Exp(float64(v - m))
		x[i] = float32(e)
		sum += e
	}
	return float32(sum)
}
