//go:build amd64 && !purego

// Short f32 rows side by side, as attention reads one head's cached keys
// and values (head_dim 64-128 floats a row). The general gather and axpy
// kernels spend ~30 cycles a row on such rows; these ~10.

#include "textflag.h"

// RSUM4 leaves the lane sums of a0..a3 in the low four lanes of t2
// (t0, t1 scratch; a0, a2 clobbered; K2 = 0x1111). VCOMPRESSPS straight to
// memory is microcoded on Zen 4 (~140 cycles), so it compresses in a
// register.
#define RSUM4(a0, a1, a2, a3, t0, t1, t2) \
	VSHUFF64X2  $0x44, a1, a0, t0 \
	VSHUFF64X2  $0xee, a1, a0, a0 \
	VADDPS      a0, t0, t0        \
	VSHUFF64X2  $0x44, a3, a2, t1 \
	VSHUFF64X2  $0xee, a3, a2, a2 \
	VADDPS      a2, t1, t1        \
	VSHUFF64X2  $0x88, t1, t0, t2 \
	VSHUFF64X2  $0xdd, t1, t0, t0 \
	VADDPS      t0, t2, t2        \
	VPERMILPS   $0x4e, t2, t0     \
	VADDPS      t0, t2, t2        \
	VPERMILPS   $0xb1, t2, t0     \
	VADDPS      t0, t2, t2        \
	VCOMPRESSPS t2, K2, t2

// FOURROWS points R9-R12 at the four rows from SI, BX bytes apart.
#define FOURROWS \
	MOVQ SI, R9           \
	LEAQ (SI)(BX*1), R10  \
	LEAQ (R10)(BX*1), R11 \
	LEAQ (R11)(BX*1), R12

#define ZERO4(a0, a1, a2, a3) \
	VPXORD a0, a0, a0 \
	VPXORD a1, a1, a1 \
	VPXORD a2, a2, a2 \
	VPXORD a3, a3, a3

// QMAC4 adds the current chunk of four rows (Z16-Z19) times x's chunk at
// xp+off (lanes of mask k) to a0..a3.
#define QMAC4(xp, off, k, a0, a1, a2, a3) \
	VMOVUPS.Z   (xp)(off*1), k, Z20 \
	VFMADD231PS Z16, Z20, a0 \
	VFMADD231PS Z17, Z20, a1 \
	VFMADD231PS Z18, Z20, a2 \
	VFMADD231PS Z19, Z20, a3

// XMAC4 adds coef[CX] at cp times the row's chunks (Z16-Z19) to a0..a3.
#define XMAC4(cp, a0, a1, a2, a3) \
	VBROADCASTSS (cp)(CX*4), Z20 \
	VFMADD231PS  Z16, Z20, a0 \
	VFMADD231PS  Z17, Z20, a1 \
	VFMADD231PS  Z18, Z20, a2 \
	VFMADD231PS  Z19, Z20, a3

// MASKS4 sets K1-K4 from the four 16-bit fields of AX, low first.
#define MASKS4 \
	KMOVW AX, K1 \
	SHRQ  $16, AX \
	KMOVW AX, K2 \
	SHRQ  $16, AX \
	KMOVW AX, K3 \
	SHRQ  $16, AX \
	KMOVW AX, K4

// YLOAD4 and YSTORE4 move 64 floats of y at p, masked by K1-K4.
#define YLOAD4(p, a0, a1, a2, a3) \
	VMOVUPS.Z (p), K1, a0 \
	VMOVUPS.Z 64(p), K2, a1 \
	VMOVUPS.Z 128(p), K3, a2 \
	VMOVUPS.Z 192(p), K4, a3

#define YSTORE4(p, a0, a1, a2, a3) \
	VMOVUPS a0, K1, (p) \
	VMOVUPS a1, K2, 64(p) \
	VMOVUPS a2, K3, 128(p) \
	VMOVUPS a3, K4, 192(p)

// func dotRowsF32(out *float32, w *float32, stride int, n int, x *float32, nfull int, tail uint64)
// out[k] = row k · x for k < n (n a multiple of 4), rows stride bytes
// apart: nfull whole 16-float chunks, then the lanes of tail (0: none).
// Four rows at a time: x's chunk is loaded once for the four, and the four
// sums are reduced together (RSUM4).
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
	FOURROWS
	ZERO4(Z0, Z1, Z2, Z3)
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
	RSUM4(Z0, Z1, Z2, Z3, Z5, Z6, Z7)
	VMOVUPS X7, (DI)
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
	MASKS4
	VMOVUPS.Z (DI), K1, Z0
	VMOVUPS.Z 64(DI), K2, Z1
	VMOVUPS.Z 128(DI), K3, Z2
	VMOVUPS.Z 192(DI), K4, Z3
	ZERO4(Z4, Z5, Z6, Z7)

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

// func dotRowsF32x4(out *float32, ldo int, w *float32, stride int, n int, x *float32, ldx int, body int, tail uint64)
// dotRowsF32 for four x at once (ldx bytes apart; out[q] ldo bytes apart):
// each chunk of the four rows is loaded once for the four x, so a prompt's
// rows read a head's keys from L2 a quarter as often. body = nfull·64.
TEXT ·dotRowsF32x4(SB), NOSPLIT, $0-72
	MOVQ out+0(FP), DI
	MOVQ w+16(FP), SI
	MOVQ stride+24(FP), BX
	MOVQ n+32(FP), CX
	MOVQ x+40(FP), DX
	MOVQ ldx+48(FP), R8
	LEAQ (DX)(R8*1), AX
	LEAQ (AX)(R8*1), R15
	LEAQ (R15)(R8*1), R8
	MOVQ tail+64(FP), R14
	KMOVW R14, K1
	MOVL $0x1111, R14
	KMOVW R14, K2
	MOVL $0xffff, R14
	KMOVW R14, K5

q4loop:
	CMPQ CX, $0
	JLE  qdone
	FOURROWS
	ZERO4(Z0, Z1, Z2, Z3)
	ZERO4(Z4, Z5, Z6, Z7)
	ZERO4(Z8, Z9, Z10, Z11)
	ZERO4(Z12, Z13, Z14, Z15)
	XORQ R13, R13

qchunk:
	CMPQ R13, body+56(FP)
	JGE  qtail
	VMOVUPS (R9)(R13*1), Z16
	VMOVUPS (R10)(R13*1), Z17
	VMOVUPS (R11)(R13*1), Z18
	VMOVUPS (R12)(R13*1), Z19
	QMAC4(DX, R13, K5, Z0, Z1, Z2, Z3)
	QMAC4(AX, R13, K5, Z4, Z5, Z6, Z7)
	QMAC4(R15, R13, K5, Z8, Z9, Z10, Z11)
	QMAC4(R8, R13, K5, Z12, Z13, Z14, Z15)
	ADDQ $64, R13
	JMP  qchunk

qtail:
	// Masked lanes load as zeros, so the FMAs need no mask.
	KORTESTW K1, K1
	JZ       qreduce
	VMOVUPS.Z (R9)(R13*1), K1, Z16
	VMOVUPS.Z (R10)(R13*1), K1, Z17
	VMOVUPS.Z (R11)(R13*1), K1, Z18
	VMOVUPS.Z (R12)(R13*1), K1, Z19
	QMAC4(DX, R13, K1, Z0, Z1, Z2, Z3)
	QMAC4(AX, R13, K1, Z4, Z5, Z6, Z7)
	QMAC4(R15, R13, K1, Z8, Z9, Z10, Z11)
	QMAC4(R8, R13, K1, Z12, Z13, Z14, Z15)

qreduce:
	MOVQ    DI, R14
	RSUM4(Z0, Z1, Z2, Z3, Z16, Z17, Z18)
	VMOVUPS X18, (R14)
	ADDQ    ldo+8(FP), R14
	RSUM4(Z4, Z5, Z6, Z7, Z16, Z17, Z18)
	VMOVUPS X18, (R14)
	ADDQ    ldo+8(FP), R14
	RSUM4(Z8, Z9, Z10, Z11, Z16, Z17, Z18)
	VMOVUPS X18, (R14)
	ADDQ    ldo+8(FP), R14
	RSUM4(Z12, Z13, Z14, Z15, Z16, Z17, Z18)
	VMOVUPS X18, (R14)
	ADDQ $16, DI
	LEAQ (R12)(BX*1), SI
	SUBQ $4, CX
	JMP  q4loop

qdone:
	VZEROUPPER
	RET

// func axpyRowsF32x4(y *float32, ldy int, w *float32, stride int, n int, coef *float32, ldc int, masks uint64)
// axpyRowsF32 for four y at once (ldy bytes apart), each with its own n
// coefficients (ldc bytes apart): each chunk of a row is loaded once for
// the four.
TEXT ·axpyRowsF32x4(SB), NOSPLIT, $0-64
	MOVQ masks+56(FP), AX
	MASKS4
	MOVQ y+0(FP), DI
	MOVQ ldy+8(FP), BX
	YLOAD4(DI, Z0, Z1, Z2, Z3)
	ADDQ BX, DI
	YLOAD4(DI, Z4, Z5, Z6, Z7)
	ADDQ BX, DI
	YLOAD4(DI, Z8, Z9, Z10, Z11)
	ADDQ BX, DI
	YLOAD4(DI, Z12, Z13, Z14, Z15)
	MOVQ w+16(FP), SI
	MOVQ stride+24(FP), BX
	MOVQ n+32(FP), DI
	MOVQ coef+40(FP), DX
	MOVQ ldc+48(FP), R8
	LEAQ (DX)(R8*1), AX
	LEAQ (AX)(R8*1), R9
	LEAQ (R9)(R8*1), R10
	XORQ CX, CX

x4row:
	CMPQ CX, DI
	JGE  x4store
	VMOVUPS.Z (SI), K1, Z16
	VMOVUPS.Z 64(SI), K2, Z17
	VMOVUPS.Z 128(SI), K3, Z18
	VMOVUPS.Z 192(SI), K4, Z19
	XMAC4(DX, Z0, Z1, Z2, Z3)
	XMAC4(AX, Z4, Z5, Z6, Z7)
	XMAC4(R9, Z8, Z9, Z10, Z11)
	XMAC4(R10, Z12, Z13, Z14, Z15)
	ADDQ BX, SI
	INCQ CX
	JMP  x4row

x4store:
	MOVQ y+0(FP), DI
	MOVQ ldy+8(FP), BX
	YSTORE4(DI, Z0, Z1, Z2, Z3)
	ADDQ BX, DI
	YSTORE4(DI, Z4, Z5, Z6, Z7)
	ADDQ BX, DI
	YSTORE4(DI, Z8, Z9, Z10, Z11)
	ADDQ BX, DI
	YSTORE4(DI, Z12, Z13, Z14, Z15)
	VZEROUPPER
	RET
