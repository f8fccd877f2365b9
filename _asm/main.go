// Command _asm generates the AVX2 kernels of package ops/avx2 with avo.
// It lives in its own module so that avo never becomes an engine dependency;
// `go generate ./ops/avx2` reruns it.
package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// pfDist is how many rows ahead prefetch runs: two groups. Measured on the
// 2-core EPYC (q4_0 gather, CPU-time GB/s): no prefetch 6-7, PREFETCHT0 one
// group ahead 11-12, PREFETCHT1 two groups ahead 11-12 at 10% of rows and
// 18 at 100% (PREFETCHT0 12); adding a T0 one group ahead made it worse.
const pfDist = 8

func main() {
	ConstraintExpr("amd64,!purego")
	constants()
	dot()
	sum()
	gatherDense("gatherF32", false)
	gatherDense("gatherF16", true)
	axpyDense("axpyF32", false)
	axpyDense("axpyF16", true)
	gatherQ8()
	gatherQ4()
	prepQ4()
	gatherQ4T()
	axpyQ8()
	axpyQ4()
	Generate()
}

var (
	cOnes16  Mem // int16 ones, for VPMADDWD
	cLow4    Mem // 0x0f bytes
	cEights  Mem // 8 bytes, the q4_0 offset
	cDupHalf Mem // VPSHUFB control: halves [a a a a b b b b] from [a b]
	cMinus8  Mem // float32 -8, eight times
)

func constants() {
	cOnes16 = GLOBL("ones16", RODATA|NOPTR)
	for i := 0; i < 32; i += 8 {
		DATA(i, U64(0x0001000100010001))
	}
	cLow4 = GLOBL("low4", RODATA|NOPTR)
	for i := 0; i < 32; i += 8 {
		DATA(i, U64(0x0f0f0f0f0f0f0f0f))
	}
	cEights = GLOBL("eights", RODATA|NOPTR)
	for i := 0; i < 32; i += 8 {
		DATA(i, U64(0x0808080808080808))
	}
	cDupHalf = GLOBL("duphalf", RODATA|NOPTR)
	DATA(0, U64(0x0100010001000100))
	DATA(8, U64(0x0302030203020302))
	cMinus8 = GLOBL("minus8", RODATA|NOPTR)
	// F32(-8) prints as $(-8), which the assembler reads as the integer -8:
	// spell out the float's bits.
	for i := 0; i < 32; i += 4 {
		DATA(i, U32(0xc1000000))
	}
}

func at(base, idx reg.Register, scale uint8, disp int) Mem {
	return Mem{Base: base, Index: idx, Scale: scale, Disp: disp}
}

func zero(v reg.VecVirtual) { VXORPS(v, v, v) }

// rowCtx is what a kernel body sees of the current group of rows.
type rowCtx struct {
	R       int             // rows in this group: 4, or 1 for the remainder
	p       []reg.GPVirtual // row base pointers
	kslot   Mem             // index of the group's first row
	next    Mem             // 4 pointers: the next group's rows, for prefetch
	scratch Mem             // 32 bytes of stack
	label   func(string) string
}

func (rc *rowCtx) k() reg.GPVirtual {
	k := GP64()
	MOVQ(rc.kslot, k)
	return k
}

// prefetch touches the rows pfDist ahead at the offset the current group has
// reached: quantized rows are too short for the hardware prefetcher, so this
// keeps rows in flight while the current group is computed. T1 fills L2,
// whose miss buffers outnumber L1's.
func (rc *rowCtx) prefetch(off reg.Register) {
	if rc.R != 4 {
		return
	}
	for i := 0; i < 4; i++ {
		t := GP64()
		MOVQ(rc.next.Offset(8*i), t)
		PREFETCHT1(at(t, off, 1, 0))
	}
}

// drive emits the walk over the whole index list (params w, stride, rows, n):
// groups of 4 rows, then single rows, each handed to body.
func drive(fn string, body func(rc *rowCtx)) { driveWith(fn, nil, body) }

// driveWith runs prologue, if any, before the walk.
func driveWith(fn string, prologue func(), body func(rc *rowCtx)) {
	if prologue != nil {
		prologue()
	}
	kslot := AllocLocal(8)
	next := AllocLocal(32)
	scratch := AllocLocal(32)
	MOVQ(U32(0), kslot)
	for _, R := range []int{4, 1} {
		lab := func(s string) string { return fmt.Sprintf("%s_r%d_%s", fn, R, s) }
		Label(lab("group"))
		k := GP64()
		MOVQ(kslot, k)
		n := Load(Param("n"), GP64())
		end := GP64()
		LEAQ(Mem{Base: k, Disp: R}, end)
		CMPQ(end, n)
		JGT(LabelRef(lab("done")))
		p, rows, w, stride := rowPointers(k, R)
		if R == 4 {
			last := GP64()
			LEAQ(Mem{Base: n, Disp: -1}, last)
			for i := 0; i < 4; i++ {
				j := GP64()
				LEAQ(Mem{Base: k, Disp: pfDist + i}, j)
				CMPQ(j, last)
				CMOVQGT(last, j)
				t := GP64()
				MOVLQSX(at(rows, j, 4, 0), t)
				IMULQ(stride, t)
				ADDQ(w, t)
				MOVQ(t, next.Offset(8*i))
			}
		}
		body(&rowCtx{R: R, p: p, kslot: kslot, next: next, scratch: scratch, label: lab})
		k2 := GP64()
		MOVQ(kslot, k2)
		ADDQ(U8(R), k2)
		MOVQ(k2, kslot)
		JMP(LabelRef(lab("group")))
		Label(lab("done"))
	}
	VZEROUPPER()
	RET()
}

// rowPointers loads params rows, w and stride and returns the addresses of
// rows[k..k+R-1] (with those params' registers).
func rowPointers(k reg.Register, R int) (p []reg.GPVirtual, rows, w, stride reg.Register) {
	rows = Load(Param("rows"), GP64())
	w = Load(Param("w"), GP64())
	stride = Load(Param("stride"), GP64())
	p = make([]reg.GPVirtual, R)
	for i := range p {
		p[i] = GP64()
		MOVLQSX(at(rows, k, 4, 4*i), p[i])
		IMULQ(stride, p[i])
		ADDQ(w, p[i])
	}
	return p, rows, w, stride
}

// hsum4 reduces four accumulators to one xmm of their four sums.
func hsum4(a []reg.VecVirtual) reg.Register {
	t0, t1 := YMM(), YMM()
	VHADDPS(a[1], a[0], t0)
	VHADDPS(a[3], a[2], t1)
	VHADDPS(t1, t0, t0)
	h := XMM()
	VEXTRACTF128(U8(1), t0, h)
	VADDPS(h, t0.AsX(), h)
	return h
}

// hsum1 reduces one accumulator into lane 0 of an xmm.
func hsum1(a reg.VecVirtual) reg.Register {
	h := XMM()
	VEXTRACTF128(U8(1), a, h)
	VADDPS(h, a.AsX(), h)
	VHADDPS(h, h, h)
	VHADDPS(h, h, h)
	return h
}

// storeSums writes the group's R results to out[k:k+R].
func storeSums(rc *rowCtx, acc []reg.VecVirtual) {
	out := Load(Param("out"), GP64())
	k := rc.k()
	if rc.R == 4 {
		VMOVUPS(hsum4(acc), at(out, k, 4, 0))
	} else {
		VMOVSS(hsum1(acc[0]), at(out, k, 4, 0))
	}
}

// packHalves loads the f16 at p[i]+off+disp of every row into one GPR, row 0
// in the low 16 bits, so that one VCVTPH2PS converts them all.
func packHalves(rc *rowCtx, off reg.Register, disp int) reg.GPVirtual {
	t := GP64()
	MOVWLZX(at(rc.p[rc.R-1], off, 1, disp), t.As32())
	for i := rc.R - 2; i >= 0; i-- {
		SHLQ(U8(16), t)
		u := GP64()
		MOVWLZX(at(rc.p[i], off, 1, disp), u.As32())
		ORQ(u, t)
	}
	return t
}
