//go:build amd64 && !purego

// The element-wise helpers of rms_norm and rope, small ops between two
// mat-vecs: a decode step runs some sixty of each on its caller alone,
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

// func ropePairs(v, c, s *float32, n int)
// Rotates the n pairs (v[2i], v[2i+1]) by the angles with cosines c[i] and
// sines s[i], n a multiple of 4. Each 8 floats: c and s duplicated per pair
// (zero-extend, then VMOVSLDUP), the pairs swapped, and VADDSUBPS gives
// x0·c − x1·s and x1·c + x0·s, each product and the sum rounded once, as
// RotatePairs' scalar loop rounds them.
TEXT ·ropePairs(SB), NOSPLIT, $0-32
	MOVQ v+0(FP), DI
	MOVQ c+8(FP), SI
	MOVQ s+16(FP), BX
	MOVQ n+24(FP), CX
	XORQ DX, DX

rploop:
	CMPQ      DX, CX
	JGE       rpdone
	VPMOVZXDQ (SI)(DX*4), Y1
	VMOVSLDUP Y1, Y1
	VPMOVZXDQ (BX)(DX*4), Y2
	VMOVSLDUP Y2, Y2
	VMOVUPS   (DI)(DX*8), Y0
	VPERMILPS $0xb1, Y0, Y3
	VMULPS    Y1, Y0, Y0
	VMULPS    Y2, Y3, Y3
	VADDSUBPS Y3, Y0, Y0
	VMOVUPS   Y0, (DI)(DX*8)
	ADDQ      $4, DX
	JMP       rploop

rpdone:
	VZEROUPPER
	RET

// func ropeHalves(lo, hi, c, s *float32, n int)
// Rotates the n pairs (lo[i], hi[i]) (GPT-NeoX's layout), n a multiple of
// 8, with RotateHalves' products and sums.
TEXT ·ropeHalves(SB), NOSPLIT, $0-40
	MOVQ lo+0(FP), DI
	MOVQ hi+8(FP), R8
	MOVQ c+16(FP), SI
	MOVQ s+24(FP), BX
	MOVQ n+32(FP), CX
	XORQ DX, DX

rhloop:
	CMPQ    DX, CX
	JGE     rhdone
	VMOVUPS (SI)(DX*4), Y1
	VMOVUPS (BX)(DX*4), Y2
	VMOVUPS (DI)(DX*4), Y0
	VMOVUPS (R8)(DX*4), Y3
	VMULPS  Y1, Y0, Y4
	VMULPS  Y2, Y3, Y5
	VSUBPS  Y5, Y4, Y4
	VMULPS  Y2, Y0, Y5
	VMULPS  Y1, Y3, Y6
	VADDPS  Y6, Y5, Y5
	VMOVUPS Y4, (DI)(DX*4)
	VMOVUPS Y5, (R8)(DX*4)
	ADDQ    $8, DX
	JMP     rhloop

rhdone:
	VZEROUPPER
	RET
