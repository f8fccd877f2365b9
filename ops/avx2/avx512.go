package avx2

import (
	"encoding/binary"
	"fmt"
	"unsafe"
)

// AVX512 reports whether the AVX-512 kernels (F, BW, VL, VBMI and VNNI,
// kernels512_amd64.s) replace the AVX2 ones where they exist: the q4_0
// gather and axpy and the q8_0 × f32 gather. Set at init; tests clear it
// to run the AVX2 kernels on the same CPU.
var AVX512 bool

// Layout of prepared q4_0 activations (prepQ4x): per group of four q8_0
// blocks, 256 bytes holding both halves of each block's x, -8·Σx per int32
// lane and d_x per lane. Every row of a gather reads the same x, so this
// is done once per token rather than once per row.
const xsGroup = 256

func xsBytes(nblk int) int { return (nblk + 3) / 4 * xsGroup }

// prepare writes token xq's prepared form into xs (xsBytes(nblk) bytes).
func prepare(xs, xq []byte, nblk int) {
	if nblk%4 != 0 {
		clear(xs[nblk/4*xsGroup:][:xsGroup]) // lanes of missing blocks read as 0
	}
	prepQ4x(&xs[0], &xq[0], nblk)
}

// tailMasks are the byte masks of the two loads over a last group of
// nblk%4 blocks (18 bytes each): [0,18r) and [8,18r).
func tailMasks(nblk int) (m1, m2 uint64) {
	r := nblk % 4
	if r == 0 {
		return 0, 0
	}
	return 1<<(18*r) - 1, 1<<(18*r-8) - 1
}

// Acts holds T tokens of activations quantized to q8_0 (as QuantizeQ8 does)
// together with what the q4_0 kernels derive from them, so that every
// matrix multiplied by the same tokens shares one preparation. The zero
// value is ready; buffers are reused across Set calls.
type Acts struct {
	Q       []byte // T*Cols/32*34 bytes: token t at t*Cols/32*34
	T, Cols int
	xs      []byte
	ready   bool // xs matches Q
	// totAt: token t's prepared x at &xs[t*xb] has its blocks' whole
	// -8·Σx totAt bytes further on (prepTotals), in the slots of the
	// per-lane ones; a fixed distance, so that the sixteen-row kernel
	// finds them with the same offset for all of its eight tokens. Made
	// only for as many tokens as that kernel takes (0: none).
	totAt int
	// pairs: on AVX2, each token's x as gatherQ4_0 prepares it (prepQ4x2,
	// pairBytes apart), made by Set for four tokens or more so that every
	// piece and matrix of a prompt's mat-muls shares it (gatherQ4Tokens).
	pairs []byte
	// p8: each token's p8Table, for the packed kernels (GatherQ4x8Acts),
	// made by PrepPacked once per Set.
	p8 []byte
}

// Set quantizes x (T rows of cols, cols a multiple of 32).
func (a *Acts) Set(x []float32, cols, T int) {
	checkBlocks("Acts.Set", cols)
	if len(x) < T*cols {
		panic(fmt.Sprintf("avx2.Acts.Set: x has %d values, want %d", len(x), T*cols))
	}
	rb := cols / 32 * q8Block
	a.Q = grow(a.Q, T*rb)
	for t := 0; t < T; t++ {
		quantize(a.Q[t*rb:(t+1)*rb], x[t*cols:(t+1)*cols])
	}
	a.T, a.Cols, a.ready = T, cols, false
	a.pairs, a.p8 = a.pairs[:0], a.p8[:0]
	switch {
	case AVX512:
		a.prep()
	case Available && T >= 4:
		nblk, pb := cols/32, pairBytes(cols/32)
		a.pairs = grow(a.pairs, T*pb)
		for t := 0; t < T; t++ {
			prepQ4x2(&a.pairs[t*pb], &a.Q[t*rb], nblk)
		}
	}
}

// Tokens is a view of tokens t0..t0+n-1 of a, sharing its buffers.
func (a *Acts) Tokens(t0, n int) Acts {
	rb := a.Cols / 32 * q8Block
	v := Acts{Q: a.Q[t0*rb : (t0+n)*rb], T: n, Cols: a.Cols, ready: a.ready, totAt: a.totAt}
	if a.ready {
		xb := xsBytes(a.Cols / 32)
		v.xs = a.xs[t0*xb : (t0+n)*xb]
	}
	if len(a.pairs) > 0 {
		pb := pairBytes(a.Cols / 32)
		v.pairs = a.pairs[t0*pb : (t0+n)*pb]
	}
	if len(a.p8) > 0 {
		tb := p8TabBytes * (a.Cols / 32)
		v.p8 = a.p8[t0*tb : (t0+n)*tb]
	}
	return v
}

// PrepPacked makes the tables that GatherQ4x8Acts reads of each token,
// once per Set; call it before threads share a.
func (a *Acts) PrepPacked() {
	if len(a.p8) > 0 || !Available {
		return
	}
	nblk := a.Cols / 32
	a.p8 = grow(a.p8, a.T*p8TabBytes*nblk)
	p8Table(a.p8, a.Q, a.T*nblk) // the tokens' blocks back to back
}

func (a *Acts) prep() {
	nblk := a.Cols / 32
	xb := xsBytes(nblk)
	a.totAt = 0
	if a.T >= r16MinT {
		a.totAt = a.T * xb
	}
	a.xs = grow(a.xs, a.T*xb+a.totAt)
	for t := 0; t < a.T; t++ {
		prepare(a.xs[t*xb:], a.Q[t*nblk*q8Block:], nblk)
		if a.totAt != 0 {
			prepTotals(a.xs[a.totAt+t*xb:][:xb], a.xs[t*xb:][:xb])
		}
	}
	a.ready = true
}

// prepTotals writes, for each block of the prepared x xs, the sum of its
// four lanes' -8·Σx (an exact int32) into the first of the same four
// slots of tot: the block's whole correction, which the sixteen-row kernel
// needs once per block and token rather than once per tile of rows.
func prepTotals(tot, xs []byte) {
	for g := 0; g < len(xs); g += xsGroup {
		for c := g + 128; c < g+192; c += 16 {
			var sum uint32
			for l := c; l < c+16; l += 4 {
				sum += binary.LittleEndian.Uint32(xs[l:])
			}
			binary.LittleEndian.PutUint32(tot[c:], sum)
		}
	}
}

func grow(b []byte, n int) []byte {
	if cap(b) < n {
		return make([]byte, n)
	}
	return b[:n]
}

// GatherQ4_0Acts sets out[t*ldo+k] = row(rows[k]) · x_t for every token t
// of a; ldo >= len(rows), and rows nil means rows 0..ldo-1. With AVX-512,
// four rows by four tokens share each decoded weight block.
func GatherQ4_0Acts(out []float32, ldo int, w []byte, rows []int32, a *Acts) {
	cols, T := a.Cols, a.T
	n := len(rows)
	if rows == nil {
		n = ldo
	}
	if ldo < n || len(out) < (T-1)*ldo+n {
		panic(fmt.Sprintf("avx2.GatherQ4_0Acts: out has %d values, want %d tokens of ldo=%d >= %d rows", len(out), T, ldo, n))
	}
	if T == 0 {
		return
	}
	rb := cols / 32 * q8Block
	ids := checkGather("GatherQ4_0Acts", out[:n], w, cols, cols/32*q4Block, rows, len(a.Q), T*rb)
	if ids == nil {
		for t := 1; t < T && cols == 0; t++ {
			clear(out[t*ldo:][:n])
		}
		return
	}
	nblk := cols / 32
	if !AVX512 || !Available {
		if len(a.pairs) == T*pairBytes(nblk) && T >= 4 && nblk%2 == 0 && n >= 2 {
			gatherQ4Tokens(out, ldo, w, ids, a, nblk)
			return
		}
		for t := 0; t < T; t++ {
			GatherQ4_0(out[t*ldo:][:n], w, cols, ids, a.Q[t*rb:(t+1)*rb])
		}
		return
	}
	if !a.ready {
		a.prep()
	}
	stride := nblk * q4Block
	if r16Fits(w, nblk, T) && a.totAt != 0 {
		gatherQ4r16(out, ldo, w, stride, ids, a, nblk)
		return
	}
	xb := xsBytes(nblk)
	t0 := 0
	if nblk%4 == 0 && T >= 4 {
		// The 4x4 kernel over whole groups of rows and tokens, a tile of
		// rows at a time: a tile stays in L2 while every group of tokens
		// uses it, so the weights come from memory once.
		T4, n4 := T&^3, n&^3
		tile := max(4, (256<<10)/stride&^3)
		for r0 := 0; r0 < n4; r0 += tile {
			r1 := min(n4, r0+tile)
			for t := 0; t < T4; t += 4 {
				gatherQ4v4(&out[t*ldo+r0], ldo, unsafe.SliceData(w), stride, &ids[r0], r1-r0, &a.xs[t*xb], xb, nblk/4)
			}
		}
		switch {
		case n4 == n:
		case n4 > 0:
			// The last four rows again, overlapping the group before:
			// the rows they share get the same values once more, and
			// that costs less than a row at a time for each token.
			for t := 0; t < T4; t += 4 {
				gatherQ4v4(&out[t*ldo+n-4], ldo, unsafe.SliceData(w), stride, &ids[n-4], 4, &a.xs[t*xb], xb, nblk/4)
			}
		default:
			for t := 0; t < T4; t++ {
				gatherPrepared(out[t*ldo:][:n], w, stride, ids, a.xs[t*xb:], nblk)
			}
		}
		t0 = T4
	}
	for t := t0; t < T; t++ {
		gatherPrepared(out[t*ldo:][:n], w, stride, ids, a.xs[t*xb:], nblk)
	}
}

func gatherPrepared(out []float32, w []byte, stride int, ids []int32, xs []byte, nblk int) {
	m1, m2 := tailMasks(nblk)
	gatherQ4v(&out[0], unsafe.SliceData(w), stride, &ids[0], len(ids), &xs[0], nblk/4, m1, m2, scattered(ids))
}

// scattered is 1 unless ids are one run of neighbouring rows (for the
// ascending ids the engine gives, exactly when the last is the first plus
// len-1): gatherQ4v then reads each row from both ends, which is faster for
// rows apart and slower for rows in a run. Either loop is correct; they
// add the blocks in another order.
func scattered(ids []int32) int {
	if int(ids[len(ids)-1]-ids[0]) == len(ids)-1 {
		return 0
	}
	return 1
}

// GatherQ8_0F32 sets out[k] = row(rows[k]) · x for q8_0 rows and f32 x:
// the weights are widened in registers, so x is not rounded to q8_0.
func GatherQ8_0F32(out []float32, w []byte, cols int, rows []int32, x []float32) {
	checkBlocks("GatherQ8_0F32", cols)
	ids := checkGather("GatherQ8_0F32", out, w, cols, cols/32*q8Block, rows, len(x), cols)
	if ids == nil {
		return
	}
	if !Available {
		goGatherQ8F(out, w, cols/32, ids, x)
		return
	}
	if !AVX512 {
		gatherQ8f2(&out[0], unsafe.SliceData(w), cols/32*q8Block, &ids[0], len(ids), &x[0], cols/32)
		return
	}
	gatherQ8f(&out[0], unsafe.SliceData(w), cols/32*q8Block, &ids[0], len(ids), &x[0], cols/32)
}

// gatherQ8vnni is GatherQ8_0 on AVX-512: x prepared per pair of blocks
// (prepQ8x, 192 bytes), then two blocks per VPDPBUSD.
func gatherQ8vnni(out []float32, w []byte, nblk int, ids []int32, xq []byte) {
	xs := q4Scratch.Get().(*[]byte)
	*xs = grow(*xs, (nblk+1)/2*192)
	if nblk%2 != 0 {
		clear((*xs)[nblk/2*192:][:192])
	}
	prepQ8x(&(*xs)[0], &xq[0], nblk)
	var m1, m2 uint64
	if nblk%2 != 0 {
		m1, m2 = 1<<34-1, 1<<30-1
	}
	gatherQ8v(&out[0], unsafe.SliceData(w), nblk*q8Block, &ids[0], len(ids), &(*xs)[0], nblk/2, m1, m2, scattered(ids))
	q4Scratch.Put(xs)
}
