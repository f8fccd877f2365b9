//go:build amd64 && !purego

// The element-wise helpers of rms_norm, one of the small ops between two
// mat-vecs: a decode step runs some sixty of them on its caller alone,
// which Go's scalar loops made 3-7 us each on 4096-wide rows. (The add op
// uses the strided axpy: Add.)

#include "textflag.h"

// func sumSq64(x *float32, n int) float64
// Σ x[i]² in float64 (each square exact, four sums of four lanes), n a
// multiple of 16.
TEXT ·sumSq64(SB), NOSPLIT, $0-24
	MOVQ   x+0(FP), AX
	MOVQ   n+8(FP), CX
	VXORPD Y0, Y0, Y0
	VXORPD Y1, Y1, Y1
	VXORPD Y2, Y2, Y2
	VXORPD Y3, Y3, Y3
	XORQ   DX, DX

sqloop:
	CMPQ        DX, CX
	JGE         sqdone
	VCVTPS2PD   (AX)(DX*4), Y4
	VCVTPS2PD   16(AX)(DX*4), Y5
	VCVTPS2PD   32(AX)(DX*4), Y6
	VCVTPS2PD   48(AX)(DX*4), Y7
	VFMADD231PD Y4, Y4, Y0
	VFMADD231PD Y5, Y5, Y1
	VFMADD231PD Y6, Y6, Y2
	VFMADD231PD Y7, Y7, Y3
	ADDQ        $16, DX
	JMP         sqloop

sqdone:
	VADDPD       Y1, Y0, Y0
	VADDPD       Y3, Y2, Y2
	VADDPD       Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPD       X1, X0, X0
	VPERMILPD    $1, X0, X1
	VADDSD       X1, X0, X0
	VZEROUPPER
	MOVSD        X0, ret+16(FP)
	RET

// func scaleMul(out, x, w *float32, s float32, n int)
// out[i] = x[i]·s·w[i] (in that order, as RMSNorm's scalar loop), n a
// multiple of 8.
TEXT ·scaleMul(SB), NOSPLIT, $0-40
	MOVQ         out+0(FP), DI
	MOVQ         x+8(FP), SI
	MOVQ         w+16(FP), BX
	VBROADCASTSS s+24(FP), Y0
	MOVQ         n+32(FP), CX
	XORQ         DX, DX

smloop:
	CMPQ    DX, CX
	JGE     smdone
	VMULPS  (SI)(DX*4), Y0, Y1
	VMULPS  (BX)(DX*4), Y1, Y1
	VMOVUPS Y1, (DI)(DX*4)
	ADDQ    $8, DX
	JMP     smloop

smdone:
	VZEROUPPER
	RET
