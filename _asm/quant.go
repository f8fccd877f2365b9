package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// Block layouts (GGML): q8_0 is f16 d + 32 int8 (34 bytes); q4_0 is f16 d +
// 16 bytes, element j<16 the low nibble of byte j and j+16 its high nibble.
const (
	q8Bytes = 34
	q4Bytes = 18
)

const axpySig = "func(y *float32, w *byte, stride int, rows *int32, n int, coef *float32, nblk int)"

// gatherQ8: int8·int8 per block with the sign trick (VPMADDUBSW wants one
// unsigned operand), then scaled by d_w*d_x in f32. xq must come from the
// q8_0 quantizer: -128 never occurs in it.
func gatherQ8() {
	TEXT("gatherQ8_0", NOSPLIT, "func(out *float32, w *byte, stride int, rows *int32, n int, xq *byte, nblk int, mid int)")
	Pragma("noescape")
	drive("gatherQ8_0", func(rc *rowCtx) {
		acc := make([]reg.VecVirtual, rc.R)
		for i := range acc {
			acc[i] = YMM()
			zero(acc[i])
		}
		ones := YMM()
		VMOVDQU(cOnes16, ones)
		x := Load(Param("xq"), GP64())
		nb := Load(Param("nblk"), GP64())
		end := GP64()
		IMUL3Q(U8(q8Bytes), nb, end)
		off := GP64()
		XORQ(off, off)
		// Temporaries are shared by the rows: fewer virtual registers keep
		// avo's allocator within Y0-Y15 (VEX encodable, no AVX-512 needed).
		xv, wv, aw, sx, sb := YMM(), YMM(), YMM(), YMM(), YMM()
		step := func(off reg.Register) {
			VMOVDQU(at(x, off, 1, 2), xv)
			// Scales of all R rows at once: d_w (packed f16) times d_x.
			g := GP64()
			MOVWLZX(at(x, off, 1, 0), g.As32())
			dx := XMM()
			VMOVD(g.As32(), dx)
			VCVTPH2PS(dx, dx)
			VBROADCASTSS(dx, dx)
			sv := XMM()
			VMOVQ(packHalves(rc, off, 0), sv)
			VCVTPH2PS(sv, sv)
			VMULPS(dx, sv, sv)
			VMOVUPS(sv, rc.scratch)
			for i := 0; i < rc.R; i++ {
				VMOVDQU(at(rc.p[i], off, 1, 2), wv)
				VPSIGNB(wv, wv, aw)
				VPSIGNB(wv, xv, sx)
				VPMADDUBSW(sx, aw, sx)
				VPMADDWD(ones, sx, sx)
				VCVTDQ2PS(sx, sx)
				VBROADCASTSS(rc.scratch.Offset(4*i), sb)
				VFMADD231PS(sb, sx, acc[i])
			}
			rc.prefetch(off)
		}
		if rc.R == 4 {
			CMPQ(Load(Param("mid"), GP64()), U8(0))
			JNE(LabelRef(rc.label("mid")))
		}
		Label(rc.label("loop"))
		CMPQ(off, end)
		JGE(LabelRef(rc.label("fin")))
		step(off)
		ADDQ(U8(q8Bytes), off)
		JMP(LabelRef(rc.label("loop")))
		if rc.R == 4 {
			// Scattered rows from both ends (ops/avx2/NOTES.md): off goes
			// up from the first block, hi down from the last. (gatherQ4 on
			// Zen 3 read scattered rows 1.0-1.12x faster straight.)
			Label(rc.label("mid"))
			hi := GP64()
			LEAQ(Mem{Base: end, Disp: -q8Bytes}, hi)
			meet(rc, off, hi, func() {
				step(off)
				step(hi)
			}, func() {
				ADDQ(U8(q8Bytes), off)
				SUBQ(U8(q8Bytes), hi)
			}, func() { step(off) })
		}
		Label(rc.label("fin"))
		storeSums(rc, acc)
	})
}

// gatherQ4 works on two blocks a, b per step: the nibbles of both rows' blocks
// sit in one ymm as [a.lo | b.lo] and [a.hi | b.hi], and x is rearranged to
// match, so int lanes 0-3 belong to block a and 4-7 to b. The nibbles stay
// unsigned: Σ(q-8)x = Σq·x - 8Σx. Everything that depends on x alone
// (rearranged x, 8Σx, d_x) is computed once per call into xs, 128 bytes per
// pair of blocks, and read from L1 by every group of rows.
func gatherQ4() {
	TEXT("gatherQ4_0", NOSPLIT, "func(out *float32, w *byte, stride int, rows *int32, n int, xq *byte, nblk int, xs *byte)")
	Pragma("noescape")
	prologue := func() { prepX("gatherQ4_0") }
	driveWith("gatherQ4_0", prologue, func(rc *rowCtx) {
		acc := make([]reg.VecVirtual, rc.R)
		for i := range acc {
			acc[i] = YMM()
			zero(acc[i])
		}
		ones, low4 := YMM(), YMM()
		VMOVDQU(cOnes16, ones)
		VMOVDQU(cLow4, low4)
		xs := Load(Param("xs"), GP64())
		cnt := Load(Param("nblk"), GP64())
		woff := GP64()
		XORQ(woff, woff)

		// One set of registers for both steps (see gatherQ8).
		s, q, hi, si := YMM(), YMM(), YMM(), YMM()
		sh := XMM()
		step := func(pair bool, woff, xs reg.Register) {
			// Row scales: [r0a r1a r2a r3a | r0b r1b r2b r3b] * d_x.
			VMOVQ(packHalves(rc, woff, 0), sh)
			if pair {
				VPINSRQ(U8(1), packHalves(rc, woff, q4Bytes), sh, sh)
			}
			VCVTPH2PS(sh, s)
			VMULPS(Mem{Base: xs, Disp: 96}, s, s)
			for i := 0; i < rc.R; i++ {
				VMOVDQU(at(rc.p[i], woff, 1, 2), q.AsX())
				if pair {
					VINSERTI128(U8(1), at(rc.p[i], woff, 1, q4Bytes+2), q, q)
				}
				VPSRLW(U8(4), q, hi)
				VPAND(low4, q, q)
				VPAND(low4, hi, hi)
				VPMADDUBSW(Mem{Base: xs}, q, q)
				VPMADDUBSW(Mem{Base: xs, Disp: 32}, hi, hi)
				VPADDW(hi, q, q)
				VPSUBW(Mem{Base: xs, Disp: 64}, q, q)
				VPMADDWD(ones, q, q)
				VCVTDQ2PS(q, q)
				VPERMILPS(U8(0x55*i), s, si)
				VFMADD231PS(si, q, acc[i])
			}
		}

		Label(rc.label("pairs"))
		CMPQ(cnt, U8(2))
		JLT(LabelRef(rc.label("single")))
		step(true, woff, xs)
		rc.prefetch(woff)
		ADDQ(U8(2*q4Bytes), woff)
		ADDQ(U8(128), xs)
		SUBQ(U8(2), cnt)
		JMP(LabelRef(rc.label("pairs")))
		Label(rc.label("single"))
		CMPQ(cnt, U8(0))
		JEQ(LabelRef(rc.label("fin")))
		step(false, woff, xs)
		Label(rc.label("fin"))
		storeSums(rc, acc)
	})
}

// prepX writes what every row's step reads of x (params xq, xs, nblk) into
// xs: per pair of blocks 128 bytes, the low and high halves of both blocks'
// x as [a | b], their -Σ8x as int16 pairs, and d_x as [a a a a | b b b b].
// Labels are prefixed by name.
func prepX(name string) {
	x := Load(Param("xq"), GP64())
	xs := Load(Param("xs"), GP64())
	cnt := Load(Param("nblk"), GP64())
	xlo, xhi, e, corr, c2, dx := YMM(), YMM(), YMM(), YMM(), YMM(), YMM()
	dxh := XMM()
	VMOVDQU(cEights, e)
	step := func(pair bool) {
		VMOVDQU(Mem{Base: x, Disp: 2}, xlo.AsX())
		VMOVDQU(Mem{Base: x, Disp: 18}, xhi.AsX())
		if pair {
			VINSERTI128(U8(1), Mem{Base: x, Disp: q8Bytes + 2}, xlo, xlo)
			VINSERTI128(U8(1), Mem{Base: x, Disp: q8Bytes + 18}, xhi, xhi)
		}
		VPMADDUBSW(xlo, e, corr)
		VPMADDUBSW(xhi, e, c2)
		VPADDW(c2, corr, corr)
		// d_x of a and b as [a a a a | b b b b].
		g := GP64()
		MOVWLZX(Mem{Base: x}, g.As32())
		if pair {
			h := GP64()
			MOVWLZX(Mem{Base: x, Disp: q8Bytes}, h.As32())
			SHLQ(U8(16), h)
			ORQ(h, g)
		}
		VMOVD(g.As32(), dxh)
		VPSHUFB(cDupHalf, dxh, dxh)
		VCVTPH2PS(dxh, dx)
		VMOVDQU(xlo, Mem{Base: xs})
		VMOVDQU(xhi, Mem{Base: xs, Disp: 32})
		VMOVDQU(corr, Mem{Base: xs, Disp: 64})
		VMOVUPS(dx, Mem{Base: xs, Disp: 96})
	}
	Label(name + "_xpairs")
	CMPQ(cnt, U8(2))
	JLT(LabelRef(name + "_xsingle"))
	step(true)
	ADDQ(U8(128), xs)
	ADDQ(U8(2*q8Bytes), x)
	SUBQ(U8(2), cnt)
	JMP(LabelRef(name + "_xpairs"))
	Label(name + "_xsingle")
	CMPQ(cnt, U8(0))
	JEQ(LabelRef(name + "_xdone"))
	step(false)
	Label(name + "_xdone")
}

// meet is the loop of a read from both ends: while lo is below hi it emits
// both (a step at each end) and next (lo up, hi down); where they meet on
// one step, one; past each other, on to fin.
func meet(rc *rowCtx, lo, hi reg.Register, both, next, one func()) {
	Label(rc.label("midloop"))
	CMPQ(lo, hi)
	JGE(LabelRef(rc.label("midlast")))
	both()
	next()
	JMP(LabelRef(rc.label("midloop")))
	Label(rc.label("midlast"))
	JNE(LabelRef(rc.label("fin")))
	one()
}

// axpyScales puts coef[k+i]*d_i of the block at woff for every row into
// scratch, for VBROADCASTSS.
func axpyScales(rc *rowCtx, cf reg.Register, woff reg.Register) {
	sv := XMM()
	VMOVQ(packHalves(rc, woff, 0), sv)
	VCVTPH2PS(sv, sv)
	VMULPS(cf, sv, sv)
	VMOVUPS(sv, rc.scratch)
}

// loadCoefs returns the group's coefficients as [c0 c1 c2 c3 | c0 c1 c2 c3]
// (one row: c0 everywhere).
func loadCoefs(rc *rowCtx) reg.VecVirtual {
	coef := Load(Param("coef"), GP64())
	k := rc.k()
	cf := YMM()
	if rc.R == 4 {
		VBROADCASTF128(at(coef, k, 4, 0), cf)
	} else {
		VBROADCASTSS(at(coef, k, 4, 0), cf)
	}
	return cf
}

// axpyQuant is q8_0's block loop: per block, the 32 y values stay in four
// ymm while every row of the group adds into them.
func axpyQuant(name string, blockBytes int, row func(p, woff reg.Register, s reg.VecVirtual, y []reg.VecVirtual, t1, t2, t3 reg.VecVirtual)) {
	TEXT(name, NOSPLIT, axpySig)
	Pragma("noescape")
	drive(name, func(rc *rowCtx) {
		cf := loadCoefs(rc).AsX()
		y := Load(Param("y"), GP64())
		cnt := Load(Param("nblk"), GP64())
		woff := GP64()
		XORQ(woff, woff)
		Label(rc.label("loop"))
		CMPQ(cnt, U8(0))
		JEQ(LabelRef(rc.label("fin")))
		axpyScales(rc, cf, woff)
		yv := []reg.VecVirtual{YMM(), YMM(), YMM(), YMM()}
		for c := range yv {
			VMOVUPS(Mem{Base: y, Disp: 32 * c}, yv[c])
		}
		s, t1, t2, t3 := YMM(), YMM(), YMM(), YMM()
		for i := 0; i < rc.R; i++ {
			VBROADCASTSS(rc.scratch.Offset(4*i), s)
			row(rc.p[i], woff, s, yv, t1, t2, t3)
		}
		for c := range yv {
			VMOVUPS(yv[c], Mem{Base: y, Disp: 32 * c})
		}
		rc.prefetch(woff)
		ADDQ(U8(blockBytes), woff)
		ADDQ(U8(128), y)
		DECQ(cnt)
		JMP(LabelRef(rc.label("loop")))
		Label(rc.label("fin"))
	})
}

func axpyQ8() {
	axpyQuant("axpyQ8_0", q8Bytes, func(p, woff reg.Register, s reg.VecVirtual, y []reg.VecVirtual, t, _, _ reg.VecVirtual) {
		for c := 0; c < 4; c++ {
			VPMOVSXBD(at(p, woff, 1, 2+8*c), t)
			VCVTDQ2PS(t, t)
			VFMADD231PS(s, t, y[c])
		}
	})
}

// axpyQ4 walks two blocks per step: 64 y values in eight ymm, each with one
// FMA per row of the group. The scales of both blocks for every row come
// from one VCVTPH2PS, lanes [r0a r1a r2a r3a | r0b r1b r2b r3b], times the
// coefficients; q4_0 stores q for q-8, so each block's y first gains -8·Σ
// of its scales. Those are made a step ahead: their chain of scalar loads,
// conversion and horizontal adds (~35 cycles) held every step behind it,
// and the loop read 5-6 GB/s hot on a Zen 3 core whatever its vector work.
func axpyQ4() {
	TEXT("axpyQ4_0", NOSPLIT, axpySig)
	Pragma("noescape")
	drive("axpyQ4_0", func(rc *rowCtx) {
		cf := loadCoefs(rc)
		y := Load(Param("y"), GP64())
		cnt := Load(Param("nblk"), GP64())
		woff := GP64()
		XORQ(woff, woff)
		s, h := YMM(), YMM()
		// scales sets s and h (lanes 0-3 and 4-7: -8·Σ of each block's
		// scales) for the pair, or the one block, at woff+disp.
		scales := func(disp int, pair bool) {
			sh := XMM()
			VMOVQ(packHalves(rc, woff, disp), sh)
			if pair {
				VPINSRQ(U8(1), packHalves(rc, woff, disp+q4Bytes), sh, sh)
			}
			VCVTPH2PS(sh, s)
			VMULPS(cf, s, s)
			VHADDPS(s, s, h)
			VHADDPS(h, h, h)
			VMULPS(cMinus8, h, h)
		}
		// step adds the pair (or block) at woff, whose s and h are made;
		// next, if given, makes the following step's first.
		step := func(pair bool, next func()) {
			blocks := 1
			if pair {
				blocks = 2
			}
			VMOVUPS(s, rc.scratch)
			yv := make([]reg.VecVirtual, 4*blocks)
			for blk := 0; blk < blocks; blk++ {
				bias := YMM()
				VPERM2F128(U8(0x11*blk), h, h, bias)
				for c := 0; c < 4; c++ {
					yv[4*blk+c] = YMM()
					VADDPS(Mem{Base: y, Disp: 128*blk + 32*c}, bias, yv[4*blk+c])
				}
			}
			if next != nil {
				next()
			}
			for i := 0; i < rc.R; i++ {
				for blk := 0; blk < blocks; blk++ {
					sv, lo, hi, t := YMM(), YMM(), YMM(), YMM()
					VBROADCASTSS(rc.scratch.Offset(16*blk+4*i), sv)
					// Zero-extended bytes: the low nibble needs a mask, the high one a shift.
					VPMOVZXBD(at(rc.p[i], woff, 1, q4Bytes*blk+2), lo)
					VPMOVZXBD(at(rc.p[i], woff, 1, q4Bytes*blk+10), hi)
					y4 := yv[4*blk:]
					VPAND(cLow4, lo, t)
					VCVTDQ2PS(t, t)
					VFMADD231PS(sv, t, y4[0])
					VPAND(cLow4, hi, t)
					VCVTDQ2PS(t, t)
					VFMADD231PS(sv, t, y4[1])
					VPSRLD(U8(4), lo, lo)
					VCVTDQ2PS(lo, lo)
					VFMADD231PS(sv, lo, y4[2])
					VPSRLD(U8(4), hi, hi)
					VCVTDQ2PS(hi, hi)
					VFMADD231PS(sv, hi, y4[3])
				}
			}
			for c, v := range yv {
				VMOVUPS(v, Mem{Base: y, Disp: 32 * c})
			}
		}
		CMPQ(cnt, U8(2))
		JLT(LabelRef(rc.label("single")))
		scales(0, true)
		Label(rc.label("pairs"))
		// Pairs while two more blocks follow this pair, making their
		// scales; then the last pair.
		CMPQ(cnt, U8(4))
		JLT(LabelRef(rc.label("lastpair")))
		step(true, func() { scales(2*q4Bytes, true) })
		rc.prefetch(woff)
		ADDQ(U8(2*q4Bytes), woff)
		ADDQ(U32(256), y)
		SUBQ(U8(2), cnt)
		JMP(LabelRef(rc.label("pairs")))
		Label(rc.label("lastpair"))
		step(true, nil)
		rc.prefetch(woff)
		ADDQ(U8(2*q4Bytes), woff)
		ADDQ(U32(256), y)
		SUBQ(U8(2), cnt)
		Label(rc.label("single"))
		CMPQ(cnt, U8(0))
		JEQ(LabelRef(rc.label("fin")))
		scales(0, false)
		step(false, nil)
		Label(rc.label("fin"))
	})
}
