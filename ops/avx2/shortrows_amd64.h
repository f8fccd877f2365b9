// The four short-row kernels, for one element type: shortrows_amd64.s
// includes this once per type, with
//   DOTROWS, DOTROWS4, AXPYROWS, AXPYROWS4  the symbols,
//   LDRX(p, off, k, z), LDRD(d, p, k, z)  a row chunk's 16 values as f32 in
//     z, the lanes of mask k (zeroing), from (p)(off*1) or d(p),
//   RCH  a chunk's bytes in a row, XS  x's bytes per row byte (x is f32).
// K5 is all ones in every kernel: the unmasked loads.

// func DOTROWS(out *float32, w *byte, stride int, n int, x *float32, nfull int, tail uint64)
// out[k] = row k · x for k < n (n a multiple of 4), rows stride bytes
// apart: nfull whole 16-value chunks, then the lanes of tail (0: none).
// Four rows at a time: x's chunk is loaded once for the four, and the four
// sums are reduced together (RSUM4).
TEXT DOTROWS(SB), NOSPLIT, $0-56
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
	KXNORW K5, K5, K5

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
	VMOVUPS (DX)(R13*XS), Z4
	LDRX(R9, R13, K5, Z16)
	LDRX(R10, R13, K5, Z17)
	LDRX(R11, R13, K5, Z18)
	LDRX(R12, R13, K5, Z19)
	VFMADD231PS Z16, Z4, Z0
	VFMADD231PS Z17, Z4, Z1
	VFMADD231PS Z18, Z4, Z2
	VFMADD231PS Z19, Z4, Z3
	ADDQ $RCH, R13
	DECQ R14
	JMP  dchunk

dtail:
	// Masked lanes load as zeros, so the FMAs need no mask.
	KORTESTW K1, K1
	JZ       dreduce
	VMOVUPS.Z (DX)(R13*XS), K1, Z4
	LDRX(R9, R13, K1, Z16)
	LDRX(R10, R13, K1, Z17)
	LDRX(R11, R13, K1, Z18)
	LDRX(R12, R13, K1, Z19)
	VFMADD231PS Z16, Z4, Z0
	VFMADD231PS Z17, Z4, Z1
	VFMADD231PS Z18, Z4, Z2
	VFMADD231PS Z19, Z4, Z3

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

// func AXPYROWS(y *float32, w *byte, stride int, n int, coef *float32, masks uint64)
// y[:64] += Σ_k coef[k]·row k[:64] for k < n, rows stride bytes apart; the
// four 16-lane chunks of y and the rows are masked by masks' four 16-bit
// fields (low first), so a last block narrower than 64 reads and writes
// only its own. Rows alternate between two sets of accumulators, which
// keeps eight FMA chains in flight.
TEXT AXPYROWS(SB), NOSPLIT, $0-48
	MOVQ y+0(FP), DI
	MOVQ w+8(FP), SI
	MOVQ stride+16(FP), BX
	MOVQ n+24(FP), CX
	MOVQ coef+32(FP), DX
	MOVQ masks+40(FP), AX
	MASKS4
	YLOAD4(DI, Z0, Z1, Z2, Z3)
	ZERO4(Z4, Z5, Z6, Z7)

a2loop:
	CMPQ CX, $2
	JLT  a1
	VBROADCASTSS (DX), Z8
	VBROADCASTSS 4(DX), Z9
	LEAQ (SI)(BX*1), R9
	ROWCHUNKS(SI, Z16, Z17, Z18, Z19)
	ROWCHUNKS(R9, Z20, Z21, Z22, Z23)
	FMA4(Z8, Z16, Z17, Z18, Z19, Z0, Z1, Z2, Z3)
	FMA4(Z9, Z20, Z21, Z22, Z23, Z4, Z5, Z6, Z7)
	LEAQ (R9)(BX*1), SI
	ADDQ $8, DX
	SUBQ $2, CX
	JMP  a2loop

a1:
	CMPQ CX, $0
	JEQ  astore
	VBROADCASTSS (DX), Z8
	ROWCHUNKS(SI, Z16, Z17, Z18, Z19)
	FMA4(Z8, Z16, Z17, Z18, Z19, Z0, Z1, Z2, Z3)

astore:
	VADDPS Z4, Z0, Z0
	VADDPS Z5, Z1, Z1
	VADDPS Z6, Z2, Z2
	VADDPS Z7, Z3, Z3
	YSTORE4(DI, Z0, Z1, Z2, Z3)
	VZEROUPPER
	RET

// func DOTROWS4(out *float32, ldo int, w *byte, stride int, n int, x *float32, ldx int, body int, tail uint64)
// DOTROWS for four x at once (ldx bytes apart; out[q] ldo bytes apart):
// each chunk of the four rows is loaded once for the four x, so a prompt's
// rows read a head's keys from L2 a quarter as often. body = nfull·RCH.
TEXT DOTROWS4(SB), NOSPLIT, $0-72
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
	KXNORW K5, K5, K5

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
	LDRX(R9, R13, K5, Z16)
	LDRX(R10, R13, K5, Z17)
	LDRX(R11, R13, K5, Z18)
	LDRX(R12, R13, K5, Z19)
	QMAC4(DX, R13, K5, Z0, Z1, Z2, Z3)
	QMAC4(AX, R13, K5, Z4, Z5, Z6, Z7)
	QMAC4(R15, R13, K5, Z8, Z9, Z10, Z11)
	QMAC4(R8, R13, K5, Z12, Z13, Z14, Z15)
	ADDQ $RCH, R13
	JMP  qchunk

qtail:
	// Masked lanes load as zeros, so the FMAs need no mask.
	KORTESTW K1, K1
	JZ       qreduce
	LDRX(R9, R13, K1, Z16)
	LDRX(R10, R13, K1, Z17)
	LDRX(R11, R13, K1, Z18)
	LDRX(R12, R13, K1, Z19)
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

// func AXPYROWS4(y *float32, ldy int, w *byte, stride int, n int, coef *float32, ldc int, masks uint64)
// AXPYROWS for four y at once (ldy bytes apart), each with its own n
// coefficients (ldc bytes apart): each chunk of a row is loaded once for
// the four.
TEXT AXPYROWS4(SB), NOSPLIT, $0-64
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
	ROWCHUNKS(SI, Z16, Z17, Z18, Z19)
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
