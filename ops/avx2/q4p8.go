package avx2

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/pinfer/pinfer/ops/half"
)

// AVX2 q4_0 kernels over rows repacked eight at a time (q4p8_amd64.s),
// which ops uses for the matrices it multiplies whole where PackPays
// (ops/packed.go, ops/avx2/NOTES.md). gatherQ4_0 spends ~9 operations a row
// and block, a third of them on scales; here int32 lane r of a 32-byte load
// is four nibble bytes of row r, so that x is broadcast four bytes at a time
// to all eight rows and a block's correction, conversion and scaling are
// paid once for the eight: ~4.3 operations a row and block. GatherQ4x8T,
// the prompt's twin, shares each unpacked part among four tokens: over 64
// tokens it reads 41-49 GB/s of weights a token against the row prefill's
// 24-27 (BenchmarkPrefillQ4x8, one Zen 3 thread).

// p8Bytes is one block of eight packed rows: their eight d (f16), then four
// 32-byte parts, part c holding bytes 4c..4c+3 of each row's 16 nibble
// bytes, row r at 4r.
const p8Bytes = 8 * q4Block

// PackQ4x8 repacks q4_0 rows (cols/32*18 bytes each; their count a multiple
// of eight) for GatherQ4x8.
func PackQ4x8(w []byte, cols int) []byte {
	p := make([]byte, len(w))
	PackQ4x8Into(p, w, cols)
	return p
}

// PackQ4x8Into is PackQ4x8 into p (len(w) bytes).
func PackQ4x8Into(p, w []byte, cols int) {
	nblk, rb := checkPack("PackQ4x8", p, w, cols, 8, func(int) int { return len(w) })
	le := binary.LittleEndian
	for g := 0; g < len(w)/(8*rb); g++ {
		for b := range nblk {
			dst := p[(g*nblk+b)*p8Bytes:][:p8Bytes]
			for r := range 8 {
				src := w[(8*g+r)*rb+b*q4Block:][:q4Block]
				le.PutUint16(dst[2*r:], le.Uint16(src))
				le.PutUint32(dst[16+4*r:], le.Uint32(src[2:]))
				le.PutUint32(dst[48+4*r:], le.Uint32(src[6:]))
				le.PutUint32(dst[80+4*r:], le.Uint32(src[10:]))
				le.PutUint32(dst[112+4*r:], le.Uint32(src[14:]))
			}
		}
	}
}

// checkPack panics unless w is whole groups of g q4_0 rows of cols columns
// and p is copyBytes(rows) long; it returns a row's blocks and bytes.
func checkPack(name string, p, w []byte, cols, g int, copyBytes func(rows int) int) (nblk, rb int) {
	checkBlocks(name, cols)
	nblk = cols / 32
	rb = nblk * q4Block
	if rb == 0 || len(w)%(g*rb) != 0 || len(p) != copyBytes(len(w)/rb) {
		panic(fmt.Sprintf("avx2.%s: %d bytes are not a whole number of groups of %d %d-byte rows, or the copy's %d", name, len(w), g, rb, len(p)))
	}
	return nblk, rb
}

// GatherQ4x8 sets out[k] = row k · x for every row of a PackQ4x8 matrix,
// x quantized by QuantizeQ8 (cols/32*34 bytes).
func GatherQ4x8(out []float32, p []byte, cols int, xq []byte) {
	checkBlocks("GatherQ4x8", cols)
	nblk := cols / 32
	if len(xq) != nblk*q8Block || nblk == 0 || len(p)%(nblk*p8Bytes) != 0 || len(out) != len(p)/(nblk*p8Bytes)*8 {
		panic(fmt.Sprintf("avx2.GatherQ4x8: out %d, packed %d bytes, x %d bytes for cols=%d", len(out), len(p), len(xq), cols))
	}
	GatherQ4x8T(out, len(out), p, cols, xq, 1)
}

// p8TabBytes is p8Table's size a block.
const p8TabBytes = 64

// p8Table writes what the packed kernels read of x besides its bytes: per
// block, 32 bytes of 8Σx (int32) and 32 of d_x (f32), each eight times, so
// that they are whole registers. Every packed mat-vec makes one per token
// before its threads start, so the loop below, ~60 ns a block, was ~1% of
// 7B decode and ~2% of its prompts; p8Tab is the same in AVX2.
func p8Table(tab, xq []byte, nblk int) {
	if len(tab) < nblk*p8TabBytes || len(xq) < nblk*q8Block {
		panic(fmt.Sprintf("avx2.p8Table: %d bytes of table and %d of x for %d blocks", len(tab), len(xq), nblk))
	}
	if Available && nblk > 0 {
		p8Tab(&tab[0], &xq[0], nblk)
		return
	}
	p8TableGo(tab, xq, nblk)
}

// p8TableGo is p8Table in Go: the portable path and the reference.
func p8TableGo(tab, xq []byte, nblk int) {
	for b := range nblk {
		blk := xq[b*q8Block:][:q8Block]
		var sum int32
		for _, v := range blk[2:] {
			sum += int32(int8(v))
		}
		dx := half.Decode(binary.LittleEndian.Uint16(blk))
		for l := range 8 {
			binary.LittleEndian.PutUint32(tab[p8TabBytes*b+4*l:], uint32(8*sum))
			binary.LittleEndian.PutUint32(tab[p8TabBytes*b+32+4*l:], math.Float32bits(dx))
		}
	}
}

// GatherQ4x8T is GatherQ4x8 for the T tokens of xq (each QuantizeQ8'd,
// back to back): out[t*ldo+k] = row k · x_t. Tiles of packed rows small
// enough to stay in L2 meet every four tokens at once (gatherQ4p8x4, which
// unpacks each part of a block once for the four); the last T%4 tokens
// take the one-token kernel.
func GatherQ4x8T(out []float32, ldo int, p []byte, cols int, xq []byte, T int) {
	checkBlocks("GatherQ4x8T", cols)
	nblk := cols / 32
	if len(xq) != T*nblk*q8Block {
		panic(fmt.Sprintf("avx2.GatherQ4x8T: x has %d bytes, want %d tokens of cols=%d", len(xq), T, cols))
	}
	checkP8("GatherQ4x8T", out, ldo, p, nblk, T)
	if !Available {
		for t := range T {
			xt := xq[t*nblk*q8Block:][:nblk*q8Block]
			for k := range len(p) / (nblk * p8Bytes) * 8 {
				out[t*ldo+k] = p8Row(p, nblk, k/8, k%8, xt)
			}
		}
		return
	}
	tab := q4Scratch.Get().(*[]byte)
	*tab = grow(*tab, T*p8TabBytes*nblk)
	p8Table(*tab, xq, T*nblk) // the tokens' blocks back to back
	gatherQ4x8Tiles(out, ldo, p, nblk, xq, T, *tab)
	q4Scratch.Put(tab)
}

// GatherQ4x8Acts is GatherQ4x8T for the tokens of a, with the tables that
// a.PrepPacked made (else its own).
func GatherQ4x8Acts(out []float32, ldo int, p []byte, a *Acts) {
	nblk := a.Cols / 32
	xq := a.Q[:a.T*nblk*q8Block]
	if len(a.p8) == 0 || nblk == 0 {
		GatherQ4x8T(out, ldo, p, a.Cols, xq, a.T)
		return
	}
	checkP8("GatherQ4x8Acts", out, ldo, p, nblk, a.T)
	gatherQ4x8Tiles(out, ldo, p, nblk, xq, a.T, a.p8)
}

// checkP8 panics unless packed p (whole groups of nblk blocks) and out
// (T tokens, ldo apart) fit each other.
func checkP8(name string, out []float32, ldo int, p []byte, nblk, T int) {
	gb := nblk * p8Bytes
	if nblk == 0 || T <= 0 || len(p)%gb != 0 || ldo < len(p)/gb*8 || len(out) < (T-1)*ldo+len(p)/gb*8 {
		panic(fmt.Sprintf("avx2.%s: out %d (ldo %d), packed %d bytes for cols=%d, T=%d", name, len(out), ldo, len(p), 32*nblk, T))
	}
}

// PackPays says whether the packed q4_0 kernels beat the row kernels on
// this CPU. On AVX2 without AVX-512 the row kernels spend ~9 operations a
// row and block. On a Zen 5 core with AVX-512 the packed one-token kernel
// read 31 GB/s from memory against the row kernel's 21.5, and with
// gatherQ4p8z4 the prompt kernel matched the row prefill (ops/avx2/NOTES.md,
// stop 33), so it pays wherever the AVX2 kernels run.
func PackPays() bool { return Available }

// p8Ahead is how far ahead, in bytes, the one-token packed mat-vec asks for
// its runs' lines: on the Zen 5 host with AVX-512, 2304 bytes ahead read
// 93-95% of a two-thread stream against 87-88% with none, and 7B decode
// ran 0.3-12.6% faster (median of ABBA phases, five runs, dense and sparse);
// on Zen 3 (AVX2) asking ahead cost a fifth (ops/avx2/NOTES.md, stops 27
// and 34). A function, not a value fixed at start, since tests turn
// AVX512 off and on.
func p8Ahead() int {
	if AVX512 {
		return 2304
	}
	return 0
}

// gatherQ4x8Tiles is GatherQ4x8T's walk on AVX2, with each token's p8Table
// in tab. One token reads the groups from memory once: their four quarters
// side by side (gatherQ4p8r4), which a core reads faster than one run or
// two, and what the quarters leave as two runs, then one.
func gatherQ4x8Tiles(out []float32, ldo int, p []byte, nblk int, xq []byte, T int, tab []byte) {
	gb := nblk * p8Bytes
	ng := len(p) / gb
	if T == 1 {
		g := 0
		if q := ng / 4; q > 0 {
			gatherQ4p8r4(&out[0], &p[0], q, &xq[0], nblk, &tab[0], q*gb, 4*8*q, p8Ahead())
			g = 4 * q
		}
		if h := (ng - g) / 2; h > 0 {
			gatherQ4p8x2(&out[8*g], &p[g*gb], h, &xq[0], nblk, &tab[0], h*gb, 4*8*h)
			g += 2 * h
		}
		if g < ng {
			gatherQ4p8(&out[8*g], &p[g*gb], 1, &xq[0], nblk, &tab[0])
		}
		return
	}
	tile := max(2, (128<<10)/gb&^1) // whole pairs for gatherQ4p8z4
	for g0 := 0; g0 < ng; g0 += tile {
		m := min(tile, ng-g0)
		t := 0
		for ; t+4 <= T; t += 4 {
			o, x, tb := t*ldo+8*g0, t*nblk*q8Block, t*p8TabBytes*nblk
			g := 0
			if h := m / 2; AVX512 && h > 0 {
				gatherQ4p8z4(&out[o], ldo, &p[g0*gb], h, &xq[x], nblk, &tab[tb])
				g = 2 * h
			}
			if g < m {
				gatherQ4p8x4(&out[o+8*g], ldo, &p[(g0+g)*gb], m-g, &xq[x], nblk, &tab[tb])
			}
		}
		for ; t < T; t++ {
			gatherQ4p8(&out[t*ldo+8*g0], &p[g0*gb], m, &xq[t*nblk*q8Block], nblk, &tab[t*p8TabBytes*nblk])
		}
	}
}

// p8Row is row r of group g of a packed matrix times xq, in plain Go: the
// portable path and the test's view of the layout.
func p8Row(p []byte, nblk, g, r int, xq []byte) float32 {
	var sum float32
	for b := range nblk {
		blk := p[(g*nblk+b)*p8Bytes:][:p8Bytes]
		xb := xq[b*q8Block:][:q8Block]
		var dot int32
		for c := range 4 {
			for i := range 4 {
				q := blk[16+32*c+4*r+i]
				dot += (int32(q&15)-8)*int32(int8(xb[2+4*c+i])) + (int32(q>>4)-8)*int32(int8(xb[18+4*c+i]))
			}
		}
		dw := half.Decode(binary.LittleEndian.Uint16(blk[2*r:]))
		dx := half.Decode(binary.LittleEndian.Uint16(xb))
		sum += dw * dx * float32(dot)
	}
	return sum
}
