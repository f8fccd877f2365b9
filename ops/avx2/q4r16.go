package avx2

import (
	"math"
	"sync"
	"unsafe"
)

// The q4_0 mat-mat of a prefill, sixteen rows to a zmm (q4r16_amd64.s).
// gatherQ4v4 gives each of its four rows a zmm of partial sums and spends
// a shuffle, a conversion and two float operations per row, token and four
// blocks on scales. Here lane r of a register is row r: a tile of sixteen
// rows is repacked once, so that part k of a block holds four nibbles of
// every row, then each token's q8 quants are broadcast four bytes at a
// time. Per block and token that is eight VPDPBUSD and three float
// operations for 512 products. It needs at least eight tokens to pay for
// the repacking (BenchmarkPrefillQ4, BenchmarkPrefillHot).

// r16Bytes is one block of sixteen repacked rows: eight 64-byte parts of
// nibbles and the sixteen d_w as f32.
const r16Bytes = 576

var r16Scratch = sync.Pool{New: func() any { return new([]byte) }}

// r16Off turns the sixteen-row kernel off: the tests' and benchmarks'
// avx512-4x4 path, which keeps the 4x4 kernel checked and measured beside it.
var r16Off bool

// r16MinT is the fewest tokens the sixteen-row kernel takes.
const r16MinT = 8

// r16Fits reports whether the sixteen-row kernel takes a call: it reads x
// in groups of four blocks and addresses rows by int32 offsets.
func r16Fits(w []byte, nblk, T int) bool {
	return !r16Off && T >= r16MinT && nblk%4 == 0 && len(w) <= math.MaxInt32
}

// gatherQ4r16 is GatherQ4_0Acts (prepared x) by tiles of sixteen rows,
// eight tokens per pass; a last tile of fewer rows repeats its last row
// and stores under a mask.
func gatherQ4r16(out []float32, ldo int, w []byte, stride int, ids []int32, a *Acts, nblk int) {
	sp := r16Scratch.Get().(*[]byte)
	defer r16Scratch.Put(sp)
	*sp = grow(*sp, nblk*r16Bytes)
	pk := *sp
	xb := xsBytes(nblk)
	var offs [32]int32 // this tile's rows, then the next's
	var xp [8]uintptr
	n, T := len(ids), a.T
	tileOffs := func(dst []int32, r0 int) {
		m := min(16, n-r0)
		for j := range dst {
			dst[j] = ids[r0+min(j, m-1)] * int32(stride)
		}
	}
	tileOffs(offs[16:], 0)
	for r0 := 0; r0 < n; r0 += 16 {
		copy(offs[:16], offs[16:])
		if r0+16 < n {
			tileOffs(offs[16:], r0+16)
		}
		repackQ4r16(&pk[0], &w[0], &offs[0], nblk)
		for t0 := 0; t0 < T; t0 += 8 {
			nt := min(8, T-t0)
			for t := range xp {
				xp[t] = uintptr(unsafe.Pointer(&a.xs[(t0+min(t, nt-1))*xb]))
			}
			dotQ4r16(&out[t0*ldo+r0], ldo, &pk[0], &xp[0], nblk/4, uint16(1<<min(16, n-r0)-1), nt, a.totAt)
		}
	}
}
