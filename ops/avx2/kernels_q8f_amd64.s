//go:build amd64 && !purego

// Hand-written AVX2 (VEX only: Y0-Y15, no AVX-512): the q8_0 × f32 gather,
// for CPUs without the AVX-512 one of kernels512_amd64.s, and F16C's
// f32 -> f16 conversion.

#include "textflag.h"
#include "rows_amd64.h"

// Q8F2 adds d·(q·x) of one row's block at p+CX (x in Y8-Y11, d in s) to acc.
#define Q8F2(p, acc, s) \
	VPMOVSXBD   2(p)(CX*1), Y12  \
	VCVTDQ2PS   Y12, Y12         \
	VMULPS      Y8, Y12, Y12     \
	VPMOVSXBD   10(p)(CX*1), Y13 \
	VCVTDQ2PS   Y13, Y13         \
	VFMADD231PS Y9, Y13, Y12     \
	VPMOVSXBD   18(p)(CX*1), Y13 \
	VCVTDQ2PS   Y13, Y13         \
	VFMADD231PS Y10, Y13, Y12    \
	VPMOVSXBD   26(p)(CX*1), Y13 \
	VCVTDQ2PS   Y13, Y13         \
	VFMADD231PS Y11, Y13, Y12    \
	VFMADD231PS Y12, s, acc

#define LOADX \
	VMOVUPS (R10), Y8   \
	VMOVUPS 32(R10), Y9 \
	VMOVUPS 64(R10), Y10 \
	VMOVUPS 96(R10), Y11

// func gatherQ8f2(out *float32, w *byte, stride int, rows *int32, n int, x *float32, nblk int)
TEXT ·gatherQ8f2(SB), NOSPLIT, $48-56
	MOVQ  nblk+48(FP), R11
	IMULQ $34, R11
	XORQ  R12, R12

f4loop:
	ROWS4(f1loop)
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	XORQ   CX, CX
	MOVQ   x+40(FP), R10

f4blk:
	CMPQ         CX, R11
	JGE          f4store
	LOADX
	PACKD
	VMOVQ        DI, X14
	VCVTPH2PS    X14, X14
	VMOVUPS      X14, 32(SP)
	VBROADCASTSS 32(SP), Y14
	Q8F2(AX, Y0, Y14)
	VBROADCASTSS 36(SP), Y14
	Q8F2(DX, Y1, Y14)
	VBROADCASTSS 40(SP), Y14
	Q8F2(R13, Y2, Y14)
	VBROADCASTSS 44(SP), Y14
	Q8F2(R14, Y3, Y14)
	PF(0, CX)
	PF(8, CX)
	PF(16, CX)
	PF(24, CX)
	ADDQ $34, CX
	ADDQ $128, R10
	JMP  f4blk

f4store:
	VHADDPS      Y1, Y0, Y0
	VHADDPS      Y3, Y2, Y2
	VHADDPS      Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	MOVQ         out+0(FP), DI
	VMOVUPS      X0, (DI)(R12*4)
	ADDQ         $4, R12
	JMP          f4loop

f1loop:
	ROW1(fdone)
	VXORPS Y0, Y0, Y0
	XORQ   CX, CX
	MOVQ   x+40(FP), R10

f1blk:
	CMPQ         CX, R11
	JGE          f1store
	LOADX
	MOVWLZX      (AX)(CX*1), DI
	VMOVD        DI, X14
	VCVTPH2PS    X14, X14
	VBROADCASTSS X14, Y14
	Q8F2(AX, Y0, Y14)
	ADDQ         $34, CX
	ADDQ         $128, R10
	JMP          f1blk

f1store:
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VHADDPS      X0, X0, X0
	VHADDPS      X0, X0, X0
	MOVQ         out+0(FP), DI
	VMOVSS       X0, (DI)(R12*4)
	INCQ         R12
	JMP          f1loop

fdone:
	VZEROUPPER
	RET

// func f32ToF16(dst *uint16, src *float32, n int)
// F16C's conversion, rounding to nearest even; n a multiple of 8.
TEXT ·f32ToF16(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX

h16loop:
	CMPQ      CX, $8
	JLT       h16done
	VMOVUPS   (SI), Y0
	VCVTPS2PH $0, Y0, (DI)
	ADDQ      $32, SI
	ADDQ      $16, DI
	SUBQ      $8, CX
	JMP       h16loop

h16done:
	VZEROUPPER
	RET
