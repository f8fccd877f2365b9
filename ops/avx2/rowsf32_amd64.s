//go:build amd64 && !purego

// Short f32 rows side by side, as attention reads one head's cached keys
// and values (head_dim 64-128 floats a row). The general gather and axpy
// kernels spend ~30 cycles a row on such rows; these ~10.

#include "textflag.h"

// func dotRowsF32(out *float32, w *float32, stride int, n int, x *float32, nfull int, tail uint64)
// out[k] = row k · x for k < n (n a multiple of 4), rows stride bytes
// apart: nfull whole 16-float chunks, then the lanes of tail (0: none).
// Four rows at a time: x's chunk is loaded once for the four, and the four
// sums are reduced together and stored by one VCOMPRESSPS 
TEXT ·dotRowsF32(SB), NOSPLIT, $0-56
	MOVQ out+0(FP), DI
	MOVQ w+8(FP), SI
	MOVQ stride+16(FP), BX
	MOVQ n+24(FP), CX
	MOVQ x+32(FP), DX
	MOVQ nfull+40(FP), R8
	MOVQ tail+48(FP), AX
	KMOVW AX, K1
	MOVL $0x1111, AX
	KMOVW AX, K2

d4loop:
	CMPQ CX, $0
	JLE  ddone
	MOVQ SI, R9
	LEAQ (SI)(BX*1), R10
	LEAQ (R10)(BX*1), R11
	LEAQ (R11)(BX*1), R12
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	XORQ R13, R13
	MOVQ R8, R14

dchunk:
	CMPQ R14, $0
	JLE  dtail
	VMOVUPS     (DX)(R13*1), Z4
	VFMADD231PS (R9)(R13*1), Z4, Z0
	VFMADD231PS (R10)(R13*1), Z4, Z1
	VFMADD231PS (R11)(R13*1), Z4, Z2
	VFMADD231PS (R12)(R13*1), Z4, Z3
	ADDQ $64, R13
	DECQ R14
	JMP  dchunk

dtail:
	KORTESTW K1, K1
	JZ       dreduce
	VMOVUPS.Z   (DX)(R13*1), K1, Z4
	VFMADD231PS (R9)(R13*1), Z4, K1, Z0
	VFMADD231PS (R10)(R13*1), Z4, K1, Z1
	VFMADD231PS (R11)(R13*1), Z4, K1, Z2
	VFMADD231PS (R12)(R13*1), Z4, K1, Z3

dreduce:
	// 256-bit halves: Z5 = row 0's | row 1's, Z6 = row 2's | row 3's.
	VSHUFF64X2 $0x44, Z1, Z0, Z5
	VSHUFF64X2 $0xee, Z1, Z0, Z0
	VADDPS     Z0, Z5, Z5
	VSHUFF64X2 $0x44, Z3, Z2, Z6
	VSHUFF64X2 $0xee, Z3, Z2, Z2
	VADDPS     Z2, Z6, Z6
	// 128-bit lanes: lane r holds four partial sums of row r.
	VSHUFF64X2 $0x88, Z6, Z5, Z7
	VSHUFF64X2 $0xdd, Z6, Z5, Z5
	VADDPS     Z5, Z7, Z7
	VPERMILPS  $0x4e, Z7, Z8
	VADDPS     Z8, Z7, Z7
	VPERMILPS  $0xb1, Z7, Z8
	VADDPS     Z8, Z7, Z7
	VCOMPRESSPS Z7, K2, Z7
	VMOVUPS     X7, (DI)
	ADDQ $16, DI
	LEAQ (R12)(BX*1), SI
	SUBQ $4, CX
	JMP  d4loop

ddone:
	VZEROUPPER
	RET

// func axpyRowsF32(y *float32, w *float32, stride int, n int, coef *float32, masks uint64)
// y[:64] += Σ_k coef[k]·row k[:64] for k < n, rows stride bytes apart; the
// four 16-lane chunks of y and the rows are masked by masks' four 16-bit
// fields (low first), so a last block narrower than 64 floats reads and
// writes only its own. Rows alternate between two sets of accumulators,
// which keeps eight FMA chains in flight.
TEXT ·axpyRowsF32(SB), NOSPLIT, $0-48
	MOVQ y+0(FP), DI
	MOVQ w+8(FP), SI
	MOVQ stride+16(FP), BX
	MOVQ n+24(FP), CX
	MOVQ coef+32(FP), DX
	MOVQ masks+40(FP), AX
	KMOVW AX, K1
	SHRQ  $16, AX
	KMOVW AX, K2
	SHRQ  $16, AX
	KMOVW AX, K3
	SHRQ  $16, AX
	KMOVW AX, K4
	VMOVUPS.Z (DI), K1, Z0
	VMOVUPS.Z 64(DI), K2, Z1
	VMOVUPS.Z 128(DI), K3, Z2
	VMOVUPS.Z 192(DI), K4, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7

a2loop:
	CMPQ CX, $2
	JLT  a1
	VBROADCASTSS (DX), Z8
	VBROADCASTSS 4(DX), Z9
	LEAQ (SI)(BX*1), R9
	VFMADD231PS (SI), Z8, K1, Z0
	VFMADD231PS 64(SI), Z8, K2, Z1
	VFMADD231PS 128(SI), Z8, K3, Z2
	VFMADD231PS 192(SI), Z8, K4, Z3
	VFMADD231PS (R9), Z9, K1, Z4
	VFMADD231PS 64(R9), Z9, K2, Z5
	VFMADD231PS 128(R9), Z9, K3, Z6
	VFMADD231PS 192(R9), Z9, K4, Z7
	LEAQ (R9)(BX*1), SI
	ADDQ $8, DX
	SUBQ $2, CX
	JMP  a2loop

a1:
	CMPQ CX, $0
	JEQ  astore
	VBROADCASTSS (DX), Z8
	VFMADD231PS (SI), Z8, K1, Z0
	VFMADD231PS 64(SI), Z8, K2, Z1
	VFMADD231PS 128(SI), Z8, K3, Z2
	VFMADD231PS 192(SI), Z8, K4, Z3

astore:
	VADDPS Z4, Z0, Z0
	VADDPS Z5, Z1, Z1
	VADDPS Z6, Z2, Z2
	VADDPS Z7, Z3, Z3
	VMOVUPS Z0, K1, (DI)
	VMOVUPS Z1, K2, 64(DI)
	VMOVUPS Z2, K3, 128(DI)
	VMOVUPS Z3, K4, 192(DI)
	VZEROUPPER
	RET
