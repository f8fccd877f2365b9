//go:build amd64 && !purego

// The q4_0 mat-mat for many tokens, with sixteen rows in the lanes of a
// zmm (q4r16.go). A tile of sixteen rows is repacked once so that lane r
// of part k holds four nibbles of row r; each token's q8 quants are then
// broadcast four bytes at a time. Per block and token that is eight
// VPDPBUSD and three float operations for 512 products, where the 4x4
// kernel (gatherQ4v4) spends about three times as many operations.

#include "textflag.h"
#include "rows_amd64.h"

DATA r16nib<>+0(SB)/4, $0x0f0f0f0f
GLOBL r16nib<>(SB), RODATA|NOPTR, $4

// R16ROW loads the sixteen quant bytes of the row at w+offs[j] (block at
// SI) into 128-bit lane l of z.
#define R16ROW(j, l, z) \
	MOVLQSX      (j*4)(R8), R9 \
	VINSERTI32X4 $l, 2(SI)(R9*1), z, z

// R16REG fills z with rows a, b, c, d, one per 128-bit lane.
#define R16REG(a, b, c, d, z, x) \
	MOVLQSX (a*4)(R8), R9     \
	VMOVDQU 2(SI)(R9*1), x    \
	R16ROW(b, 1, z)           \
	R16ROW(c, 2, z)           \
	R16ROW(d, 3, z)

// R16PF prefetches the block at SI of the next tile's row j (offs[16+j]).
#define R16PF(j) \
	MOVLQSX    (64+j*4)(R8), R10 \
	PREFETCHT0 (SI)(R10*1)

// func repackQ4r16(pk *byte, w *byte, offs *int32, nblk int)
// offs: the sixteen rows' byte offsets, then the next tile's, whose blocks
// are prefetched alongside (half the rows per block, every line of each):
// the hardware prefetchers do not follow sixteen rows read side by side.
TEXT ·repackQ4r16(SB), NOSPLIT, $0-32
	MOVQ      pk+0(FP), DI
	MOVQ      w+8(FP), SI
	MOVQ      offs+16(FP), R8
	MOVQ      nblk+24(FP), R11
	VMOVDQU32 (R8), Z30
	VPBROADCASTD r16nib<>(SB), Z31

r16blk:
	// Row 4i+j goes to lane i of the j-th register, so that after the
	// transpose dword 4i+j of part k is row 4i+j's.
	R16REG(0, 4, 8, 12, Z0, X0)
	R16REG(1, 5, 9, 13, Z1, X1)
	R16REG(2, 6, 10, 14, Z2, X2)
	R16REG(3, 7, 11, 15, Z3, X3)
	VPUNPCKLDQ  Z1, Z0, Z4
	VPUNPCKHDQ  Z1, Z0, Z5
	VPUNPCKLDQ  Z3, Z2, Z6
	VPUNPCKHDQ  Z3, Z2, Z7
	VPUNPCKLQDQ Z6, Z4, Z0
	VPUNPCKHQDQ Z6, Z4, Z1
	VPUNPCKLQDQ Z7, Z5, Z2
	VPUNPCKHQDQ Z7, Z5, Z3
	VPSRLD      $4, Z0, Z4
	VPSRLD      $4, Z1, Z5
	VPSRLD      $4, Z2, Z6
	VPSRLD      $4, Z3, Z7
	VPANDD      Z31, Z0, Z0
	VPANDD      Z31, Z1, Z1
	VPANDD      Z31, Z2, Z2
	VPANDD      Z31, Z3, Z3
	VPANDD      Z31, Z4, Z4
	VPANDD      Z31, Z5, Z5
	VPANDD      Z31, Z6, Z6
	VPANDD      Z31, Z7, Z7
	VMOVDQU64   Z0, 0(DI)
	VMOVDQU64   Z1, 64(DI)
	VMOVDQU64   Z2, 128(DI)
	VMOVDQU64   Z3, 192(DI)
	VMOVDQU64   Z4, 256(DI)
	VMOVDQU64   Z5, 320(DI)
	VMOVDQU64   Z6, 384(DI)
	VMOVDQU64   Z7, 448(DI)
	KXNORW      K1, K1, K1
	VPGATHERDD  (SI)(Z30*1), K1, Z8
	VPMOVDW     Z8, Y8
	VCVTPH2PS   Y8, Z8
	VMOVUPS     Z8, 512(DI)
	TESTQ       $1, R11
	JZ          r16pfhi
	R16PF(0)
	R16PF(1)
	R16PF(2)
	R16PF(3)
	R16PF(4)
	R16PF(5)
	R16PF(6)
	R16PF(7)
	JMP         r16next

r16pfhi:
	R16PF(8)
	R16PF(9)
	R16PF(10)
	R16PF(11)
	R16PF(12)
	R16PF(13)
	R16PF(14)
	R16PF(15)

r16next:
	ADDQ        $18, SI
	ADDQ        $576, DI
	DECQ        R11
	JNZ         r16blk
	VZEROUPPER
	RET

// R16TOK adds token x's share of one block to f: the int32 lanes start at
// the block's whole -8·Σx (at SI = CX + tot past x: Acts.totAt), so that
// the unsigned nibbles count as q-8, take eight broadcast quads of x, then
// are scaled by d_x and by the rows' d_w in Z8.
#define R16TOK(x, f, i) \
	VPBROADCASTD  128(x)(SI*1), i     \
	VPDPBUSD.BCST 0(x)(CX*1), Z0, i   \
	VPDPBUSD.BCST 4(x)(CX*1), Z1, i   \
	VPDPBUSD.BCST 8(x)(CX*1), Z2, i   \
	VPDPBUSD.BCST 12(x)(CX*1), Z3, i  \
	VPDPBUSD.BCST 64(x)(CX*1), Z4, i  \
	VPDPBUSD.BCST 68(x)(CX*1), Z5, i  \
	VPDPBUSD.BCST 72(x)(CX*1), Z6, i  \
	VPDPBUSD.BCST 76(x)(CX*1), Z7, i  \
	VCVTDQ2PS     i, i                \
	VMULPS.BCST   192(x)(CX*1), i, i  \
	VFMADD231PS   i, Z8, f

// R16BLK: one block of the sixteen rows (at DX) for the eight tokens. The
// prepared x (prepQ4x) keeps block c of a group of four at 16c in each
// 64-byte part, so CX steps by 16 per block and by 192 more per group.
#define R16BLK \
	VMOVDQU64 0(DX), Z0        \
	VMOVDQU64 64(DX), Z1       \
	VMOVDQU64 128(DX), Z2      \
	VMOVDQU64 192(DX), Z3      \
	VMOVDQU64 256(DX), Z4      \
	VMOVDQU64 320(DX), Z5      \
	VMOVDQU64 384(DX), Z6      \
	VMOVDQU64 448(DX), Z7      \
	VMOVUPS   512(DX), Z8      \
	R16TOK(R8, Z9, Z17)        \
	R16TOK(R9, Z10, Z18)       \
	R16TOK(R10, Z11, Z19)      \
	R16TOK(R11, Z12, Z20)      \
	R16TOK(R12, Z13, Z21)      \
	R16TOK(R13, Z14, Z22)      \
	R16TOK(R14, Z15, Z23)      \
	R16TOK(R15, Z16, Z24)      \
	ADDQ      $576, DX         \
	ADDQ      $16, CX          \
	ADDQ      $16, SI

// R16STORE stores token t's sixteen rows (f) ldo past the one before,
// unless the pass has fewer than t tokens (AX).
#define R16STORE(f, t) \
	CMPQ    AX, $t     \
	JLT     r16done    \
	ADDQ    BX, DI     \
	VMOVUPS f, K1, (DI)

// func dotQ4r16(out *float32, ldo int, pk *byte, xs *uintptr, ngrp int, mask uint16, nt int, tot int)
// xs: eight prepared tokens; out: nt tokens of sixteen rows, ldo apart.
TEXT ·dotQ4r16(SB), NOSPLIT, $0-64
	MOVQ   xs+24(FP), AX
	MOVQ   0(AX), R8
	MOVQ   8(AX), R9
	MOVQ   16(AX), R10
	MOVQ   24(AX), R11
	MOVQ   32(AX), R12
	MOVQ   40(AX), R13
	MOVQ   48(AX), R14
	MOVQ   56(AX), R15
	MOVQ   pk+16(FP), DX
	MOVQ   ngrp+32(FP), BX
	XORQ   CX, CX
	MOVQ   tot+56(FP), SI
	ZERO4(Z9, Z10, Z11, Z12)
	ZERO4(Z13, Z14, Z15, Z16)

r16grp:
	R16BLK
	R16BLK
	R16BLK
	R16BLK
	ADDQ $192, CX
	ADDQ $192, SI
	DECQ BX
	JNZ  r16grp

	MOVQ  out+0(FP), DI
	MOVQ  ldo+8(FP), BX
	SHLQ  $2, BX
	KMOVW mask+40(FP), K1
	MOVQ  nt+48(FP), AX
	VMOVUPS Z9, K1, (DI)
	R16STORE(Z10, 2)
	R16STORE(Z11, 3)
	R16STORE(Z12, 4)
	R16STORE(Z13, 5)
	R16STORE(Z14, 6)
	R16STORE(Z15, 7)
	R16STORE(Z16, 8)

r16done:
	VZEROUPPER
	RET
