package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// prepQ4 is gatherQ4_0's preparation of x on its own, so that a prompt's
// tokens are prepared once and then read by every tile of rows.
func prepQ4() {
	TEXT("prepQ4x2", NOSPLIT, "func(xs *byte, xq *byte, nblk int)")
	Pragma("noescape")
	prepX("prepQ4x2")
	VZEROUPPER()
	RET()
}

// gatherQ4T is the q4_0 gather for four tokens of a prompt at once: two rows
// a step, each pair of blocks unpacked once for all four tokens (the loads,
// shift and masks are 5 of the 13 operations a row and pair of blocks costs
// one token). xs holds the four tokens' prepared x (prepQ4x2), xsb bytes
// apart; out[t*ldo+k] gets row k · x_t. nblk is even, n at least 2.
func gatherQ4T() {
	TEXT("gatherQ4x4", NOSPLIT, "func(out *float32, ldo int, w *byte, stride int, rows *int32, n int, xs *byte, xsb int, nblk int)")
	Pragma("noescape")
	const T, R = 4, 2
	k := GP64()
	XORQ(k, k)
	Label("gatherQ4x4_rows")
	end := GP64()
	LEAQ(Mem{Base: k, Disp: R}, end)
	CMPQ(end, Load(Param("n"), GP64()))
	JGT(LabelRef("gatherQ4x4_done"))
	p, _, _, _ := rowPointers(k, R)
	xsb := Load(Param("xsb"), GP64())
	x := make([]reg.Register, T)
	x[0] = Load(Param("xs"), GP64())
	for t := 1; t < T; t++ {
		x[t] = GP64()
		LEAQ(Mem{Base: x[t-1], Index: xsb, Scale: 1}, x[t])
	}
	acc := make([][]reg.VecVirtual, R)
	for r := range acc {
		acc[r] = make([]reg.VecVirtual, T)
		for t := range acc[r] {
			acc[r][t] = YMM()
			zero(acc[r][t])
		}
	}
	ones := YMM()
	VMOVDQU(cOnes16, ones)
	cnt := Load(Param("nblk"), GP64())
	woff := GP64()
	XORQ(woff, woff)

	Label("gatherQ4x4_pairs")
	CMPQ(cnt, U8(0))
	JEQ(LabelRef("gatherQ4x4_store"))
	// Row scales [r0a r1a . . | r0b r1b . .]; lanes 2, 3 are not read.
	sh := XMM()
	VPXOR(sh, sh, sh)
	for r := 0; r < R; r++ {
		VPINSRW(U8(r), at(p[r], woff, 1, 0), sh, sh)
		VPINSRW(U8(4+r), at(p[r], woff, 1, q4Bytes), sh, sh)
	}
	sw := YMM()
	VCVTPH2PS(sh, sw)
	for r := 0; r < R; r++ {
		lo, hi, sr := YMM(), YMM(), YMM()
		VMOVDQU(at(p[r], woff, 1, 2), lo.AsX())
		VINSERTI128(U8(1), at(p[r], woff, 1, q4Bytes+2), lo, lo)
		VPSRLW(U8(4), lo, hi)
		VPAND(cLow4, lo, lo)
		VPAND(cLow4, hi, hi)
		VPERMILPS(U8(0x55*r), sw, sr)
		for t := 0; t < T; t++ {
			m, m2 := YMM(), YMM()
			VPMADDUBSW(Mem{Base: x[t]}, lo, m)
			VPMADDUBSW(Mem{Base: x[t], Disp: 32}, hi, m2)
			VPADDW(m2, m, m)
			VPSUBW(Mem{Base: x[t], Disp: 64}, m, m)
			VPMADDWD(ones, m, m)
			VCVTDQ2PS(m, m)
			st := YMM()
			VMULPS(Mem{Base: x[t], Disp: 96}, sr, st)
			VFMADD231PS(st, m, acc[r][t])
		}
	}
	for t := 0; t < T; t++ {
		ADDQ(U8(128), x[t])
	}
	ADDQ(U8(2*q4Bytes), woff)
	SUBQ(U8(2), cnt)
	JMP(LabelRef("gatherQ4x4_pairs"))

	Label("gatherQ4x4_store")
	out := Load(Param("out"), GP64())
	ldo := Load(Param("ldo"), GP64())
	SHLQ(U8(2), ldo)
	o := GP64()
	LEAQ(at(out, k, 4, 0), o)
	for r := 0; r < R; r++ {
		h := hsum4(acc[r])
		oo := GP64()
		MOVQ(o, oo)
		for t := 0; t < T; t++ {
			if t == 0 {
				VMOVSS(h, Mem{Base: oo, Disp: 4 * r})
			} else {
				VEXTRACTPS(U8(t), h, Mem{Base: oo, Disp: 4 * r})
			}
			if t < T-1 {
				ADDQ(ldo, oo)
			}
		}
	}
	ADDQ(U8(R), k)
	JMP(LabelRef("gatherQ4x4_rows"))
	Label("gatherQ4x4_done")
	VZEROUPPER()
	RET()
}
