// The two short-row kernels, for one element type: shortrows_amd64.s
// includes this once per type, with
//   DOTROWS4, AXPYROWS4  the symbols,
//   LDRX(p, off, k, z), LDRD(d, p, k, z)  a row chunk's 16 values as f32 in
//     z, the lanes of mask k (zeroing), from (p)(off*1) or d(p),
//   RCH  a chunk's bytes in a row, XS  x's bytes per row byte (x is f32).
// K5 is all ones: the unmasked loads.

// func DOTROWS4(out *float32, ldo int, w *byte, stride int, n int, x *float32, ldx int, body int, tail uint64)
// out[q][k] = row k · x_q for q < 4 and k < n (n a multiple of 4): the x
// ldx bytes apart, out[q] ldo bytes apart, rows stride bytes apart, each
// with body bytes of whole 16-value chunks and then the lanes of tail (0:
// none). Four rows by four x at a time: each chunk of the rows is loaded
// once for the four x, so a prompt's rows read a head's keys from L2 a
// quarter as often, and each four sums are reduced together (RSUM4).
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
	DOT4CHUNK(K5)
	ADDQ $RCH, R13
	JMP  qchunk

qtail:
	// Masked lanes load as zeros, so the FMAs need no mask.
	KORTESTW K1, K1
	JZ       qreduce
	DOT4CHUNK(K1)

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
// y_q[:64] += Σ_k coef_q[k]·row k[:64] for q < 4 and k < n: the y ldy
// bytes apart, each with its n coefficients (ldc bytes apart), rows stride
// bytes apart. The four 16-lane chunks are masked by masks' four 16-bit
// fields (low first), so a last block narrower than 64 reads and writes
// only its own. Each chunk of a row is loaded once for the four y.
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
