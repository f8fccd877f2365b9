package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// dot: n is a multiple of 8; the Go wrapper adds the tail.
func dot() {
	TEXT("dot", NOSPLIT, "func(a, b *float32, n int) float32")
	Pragma("noescape")
	a := Load(Param("a"), GP64())
	b := Load(Param("b"), GP64())
	n := Load(Param("n"), GP64())
	reduce8("dot", n, func(i reg.GPVirtual, off int, acc reg.VecVirtual) {
		t := YMM()
		VMOVUPS(at(a, i, 4, off), t)
		VFMADD231PS(at(b, i, 4, off), t, acc)
	})
}

// sum is a plain streaming read: the bandwidth ceiling the other kernels are
// measured against. n is a multiple of 8.
func sum() {
	TEXT("sum", NOSPLIT, "func(a *float32, n int) float32")
	Pragma("noescape")
	a := Load(Param("a"), GP64())
	n := Load(Param("n"), GP64())
	reduce8("sum", n, func(i reg.GPVirtual, off int, acc reg.VecVirtual) {
		VADDPS(at(a, i, 4, off), acc, acc)
	})
}

// reduce8 is the loop of dot and sum: step adds 8 floats at element i,
// byte offset off, into acc; four accumulators over 32 floats, then 8 at a
// time up to n; it returns their total.
func reduce8(name string, n reg.Register, step func(i reg.GPVirtual, off int, acc reg.VecVirtual)) {
	acc := []reg.VecVirtual{YMM(), YMM(), YMM(), YMM()}
	for _, v := range acc {
		zero(v)
	}
	i := GP64()
	XORQ(i, i)
	end := GP64()
	MOVQ(n, end)
	ANDQ(I32(-32), end)
	Label(name + "_main")
	CMPQ(i, end)
	JGE(LabelRef(name + "_rem"))
	for c := 0; c < 4; c++ {
		step(i, 32*c, acc[c])
	}
	ADDQ(U8(32), i)
	JMP(LabelRef(name + "_main"))
	Label(name + "_rem")
	CMPQ(i, n)
	JGE(LabelRef(name + "_done"))
	step(i, 0, acc[0])
	ADDQ(U8(8), i)
	JMP(LabelRef(name + "_rem"))
	Label(name + "_done")
	VADDPS(acc[1], acc[0], acc[0])
	VADDPS(acc[3], acc[2], acc[2])
	VADDPS(acc[2], acc[0], acc[0])
	// VZEROUPPER first: avo writes the store as an SSE MOVSS, and no SSE
	// instruction should run with the upper halves dirty
	// (TestAsmLeavesAVXClean).
	h := hsum1(acc[0])
	VZEROUPPER()
	Store(h, ReturnIndex(0))
	RET()
}

// denseShape: element bytes and x's index scale (x is f32, the row f32 or f16).
// One main iteration covers 64 bytes of each row, one cache line.
func denseShape(half bool) (chunkBytes int, xScale uint8) {
	if half {
		return 16, 2
	}
	return 32, 1
}

// rowChunk returns 8 row elements as f32: a memory operand for f32, converted
// for f16.
func rowChunk(p, off reg.Register, disp int, half bool, t reg.VecVirtual) Op {
	m := at(p, off, 1, disp)
	if !half {
		return m
	}
	VCVTPH2PS(m, t)
	return t
}

// gatherDense: out[k] = row(rows[k]) · x over cols (a multiple of 8).
func gatherDense(name string, half bool) {
	TEXT(name, NOSPLIT, "func(out *float32, w *byte, stride int, rows *int32, n int, x *float32, cols int)")
	Pragma("noescape")
	cb, xs := denseShape(half)
	drive(name, func(rc *rowCtx) {
		perRow := 2
		if rc.R == 1 {
			perRow = 4
		}
		acc := make([][]reg.VecVirtual, rc.R)
		for i := range acc {
			for a := 0; a < perRow; a++ {
				v := YMM()
				zero(v)
				acc[i] = append(acc[i], v)
			}
		}
		x := Load(Param("x"), GP64())
		cols := Load(Param("cols"), GP64())
		// off is a byte offset in the row; x is addressed at off*xs.
		end8 := GP64()
		IMUL3Q(U8(cb/8), cols, end8)
		end := GP64()
		MOVQ(end8, end)
		ANDQ(I32(-64), end)
		off := GP64()
		XORQ(off, off)
		xv, t := YMM(), YMM()
		Label(rc.label("main"))
		CMPQ(off, end)
		JGE(LabelRef(rc.label("rem")))
		for c := 0; c < 64/cb; c++ {
			VMOVUPS(at(x, off, xs, 32*c), xv)
			for i := 0; i < rc.R; i++ {
				VFMADD231PS(rowChunk(rc.p[i], off, cb*c, half, t), xv, acc[i][c%perRow])
			}
		}
		rc.prefetch(off)
		ADDQ(U8(64), off)
		JMP(LabelRef(rc.label("main")))
		Label(rc.label("rem"))
		CMPQ(off, end8)
		JGE(LabelRef(rc.label("fin")))
		VMOVUPS(at(x, off, xs, 0), xv)
		for i := 0; i < rc.R; i++ {
			VFMADD231PS(rowChunk(rc.p[i], off, 0, half, t), xv, acc[i][0])
		}
		ADDQ(U8(cb), off)
		JMP(LabelRef(rc.label("rem")))
		Label(rc.label("fin"))
		sums := make([]reg.VecVirtual, rc.R)
		for i := range acc {
			for a := 1; a < perRow; a++ {
				VADDPS(acc[i][a], acc[i][0], acc[i][0])
			}
			sums[i] = acc[i][0]
		}
		storeSums(rc, sums)
	})
}

// axpyDense: y += Σ coef[k] * row(rows[k]) over cols (a multiple of 8).
func axpyDense(name string, half bool) {
	TEXT(name, NOSPLIT, "func(y *float32, w *byte, stride int, rows *int32, n int, coef *float32, cols int)")
	Pragma("noescape")
	cb, xs := denseShape(half)
	drive(name, func(rc *rowCtx) {
		coef := Load(Param("coef"), GP64())
		k := rc.k()
		cv := make([]reg.VecVirtual, rc.R)
		for i := range cv {
			cv[i] = YMM()
			VBROADCASTSS(at(coef, k, 4, 4*i), cv[i])
		}
		y := Load(Param("y"), GP64())
		cols := Load(Param("cols"), GP64())
		end8 := GP64()
		IMUL3Q(U8(cb/8), cols, end8)
		end := GP64()
		MOVQ(end8, end)
		ANDQ(I32(-64), end)
		off := GP64()
		XORQ(off, off)
		yv, t := YMM(), YMM()
		chunk := func(disp int) {
			ym := at(y, off, xs, 32*disp/cb)
			VMOVUPS(ym, yv)
			for i := 0; i < rc.R; i++ {
				VFMADD231PS(rowChunk(rc.p[i], off, disp, half, t), cv[i], yv)
			}
			VMOVUPS(yv, ym)
		}
		Label(rc.label("main"))
		CMPQ(off, end)
		JGE(LabelRef(rc.label("rem")))
		for c := 0; c < 64/cb; c++ {
			chunk(cb * c)
		}
		rc.prefetch(off)
		ADDQ(U8(64), off)
		JMP(LabelRef(rc.label("main")))
		Label(rc.label("rem"))
		CMPQ(off, end8)
		JGE(LabelRef(rc.label("fin")))
		chunk(0)
		ADDQ(U8(cb), off)
		JMP(LabelRef(rc.label("rem")))
		Label(rc.label("fin"))
	})
}
