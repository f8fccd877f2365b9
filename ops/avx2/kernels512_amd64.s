//go:build amd64 && !purego

// Hand-written AVX-512 kernels (F, BW, DQ, VL, VBMI, VNNI, GFNI), selected at init by
// cpuid next to the AVX2 ones of kernels_amd64.s. See avx512.go for the
// layouts; every kernel trusts its Go wrapper for bounds.

#include "textflag.h"
#include "hmax_amd64.h"
#include "rows_amd64.h"

// q4perm: VPERMT2B control that gathers the 16 nibble bytes of each of four
// q4_0 blocks (72 bytes, read as [0,64) and [8,72)) into one zmm.
DATA q4perm<>+0(SB)/8, $0x0908070605040302
DATA q4perm<>+8(SB)/8, $0x11100f0e0d0c0b0a
DATA q4perm<>+16(SB)/8, $0x1b1a191817161514
DATA q4perm<>+24(SB)/8, $0x232221201f1e1d1c
DATA q4perm<>+32(SB)/8, $0x2d2c2b2a29282726
DATA q4perm<>+40(SB)/8, $0x3534333231302f2e
DATA q4perm<>+48(SB)/8, $0x3f3e3d3c3b3a3938
DATA q4perm<>+56(SB)/8, $0x7f7e7d7c7b7a7978
GLOBL q4perm<>(SB), RODATA|NOPTR, $64

// q4wperm: VPERMW control putting each of the four blocks' f16 scales
// (words 0, 9, 18, 27) in four consecutive words.
DATA q4wperm<>+0(SB)/8, $0x0000000000000000
DATA q4wperm<>+8(SB)/8, $0x0009000900090009
DATA q4wperm<>+16(SB)/8, $0x0012001200120012
DATA q4wperm<>+24(SB)/8, $0x001b001b001b001b
DATA q4wperm<>+32(SB)/8, $0x0000000000000000
DATA q4wperm<>+40(SB)/8, $0x0000000000000000
DATA q4wperm<>+48(SB)/8, $0x0000000000000000
DATA q4wperm<>+56(SB)/8, $0x0000000000000000
GLOBL q4wperm<>(SB), RODATA|NOPTR, $64

// q4tab: float32 q-8 for q = 0..15, the VPERMPS table of the q4_0 axpy.
DATA q4tab<>+0(SB)/8, $0xc0e00000c1000000
DATA q4tab<>+8(SB)/8, $0xc0a00000c0c00000
DATA q4tab<>+16(SB)/8, $0xc0400000c0800000
DATA q4tab<>+24(SB)/8, $0xbf800000c0000000
DATA q4tab<>+32(SB)/8, $0x3f80000000000000
DATA q4tab<>+40(SB)/8, $0x4040000040000000
DATA q4tab<>+48(SB)/8, $0x40a0000040800000
DATA q4tab<>+56(SB)/8, $0x40e0000040c00000
GLOBL q4tab<>(SB), RODATA|NOPTR, $64

DATA nib4<>+0(SB)/4, $0x0f0f0f0f
GLOBL nib4<>(SB), RODATA|NOPTR, $4
// hinib: GF2P8AFFINEQB matrix moving each byte's high nibble to its low bits.
DATA hinib<>+0(SB)/8, $0x1020408000000000
GLOBL hinib<>(SB), RODATA|NOPTR, $8

DATA eight4<>+0(SB)/4, $0x08080808
GLOBL eight4<>(SB), RODATA|NOPTR, $4

// func prepQ4x(xs *byte, xq *byte, nblk int)
// For every group of four q8_0 activation blocks, 256 bytes of xs: the
// first 16 x of each block [0,64), the last 16 [64,128), -8·Σx of each
// int32 lane's eight x [128,192) and d_x per lane [192,256);
// block k owns lanes 4k..4k+3.
TEXT ·prepQ4x(SB), NOSPLIT, $0-24
	MOVQ xs+0(FP), DI
	MOVQ xq+8(FP), SI
	MOVQ nblk+16(FP), DX
	VPBROADCASTD eight4<>(SB), X15
	VPXORD X14, X14, X14
	XORQ CX, CX

ploop:
	TESTQ DX, DX
	JZ    pdone
	VMOVDQU 2(SI), X0
	VMOVDQU 18(SI), X1
	VPXORD  X2, X2, X2
	VPDPBUSD X0, X15, X2
	VPDPBUSD X1, X15, X2
	VPSUBD  X2, X14, X2
	// Each lane's own -8·Σx (its four x of each half), so that a lane's
	// int32 is exactly Σ(nibble-8)·x over its eight products: with the
	// block's whole -8·Σx in one lane, a block whose nibbles are all 8 left
	// lanes that cancel only in float32, wrong by ulps of d_w·d_x·Σ (found by
	// FuzzGather). The sixteen-row kernel reads their sum (prepTotals).
	VPBROADCASTW (SI), X3
	VCVTPH2PS X3, X3
	VMOVDQU X0, (DI)(CX*1)
	VMOVDQU X1, 64(DI)(CX*1)
	VMOVDQU X2, 128(DI)(CX*1)
	VMOVUPS X3, 192(DI)(CX*1)
	ADDQ    $34, SI
	ADDQ    $16, CX
	CMPQ    CX, $64
	JLT     pnext
	XORQ    CX, CX
	ADDQ    $256, DI

pnext:
	DECQ DX
	JMP  ploop

pdone:
	VZEROUPPER
	RET

// Q4ROW adds one row's four blocks at p+off (x parts in Z20-Z23) to acc.
// The nibbles stay unsigned for VPDPBUSD; the -8 offset is the corr lanes.
#define Q4ROW(p, off, acc, t0, t1, t1y, t2, t3) \
	VMOVDQU64   (p)(off*1), t0    \
	VPERMW      t0, Z29, t1      \
	VPERMT2B    8(p)(off*1), Z30, t0 \
	VCVTPH2PS   t1y, t1          \
	VGF2P8AFFINEQB $0, Z28, t0, t2 \
	VPANDD      Z31, t0, t0      \
	VMOVDQA64   Z22, t3          \
	VPDPBUSD    Z20, t0, t3      \
	VPDPBUSD    Z21, t2, t3      \
	VMULPS      Z23, t1, t1      \
	VCVTDQ2PS   t3, t3           \
	VFMADD231PS t3, t1, acc

// Q4TAIL is Q4ROW over a last group of 1-3 blocks: masked loads (K1, K2)
// never touch the bytes past the row.
#define Q4TAIL(p, acc, t0, t1, t1y, t2, t3) \
	VMOVDQU8.Z  (p)(CX*1), K1, t0  \
	VMOVDQU8.Z  8(p)(CX*1), K2, t2 \
	VPERMW      t0, Z29, t1      \
	VPERMT2B    t2, Z30, t0      \
	VCVTPH2PS   t1y, t1          \
	VPSRLW      $4, t0, t2       \
	VPANDD      Z31, t0, t0      \
	VPANDD      Z31, t2, t2      \
	VMOVDQA64   Z22, t3          \
	VPDPBUSD    Z20, t0, t3      \
	VPDPBUSD    Z21, t2, t3      \
	VMULPS      Z23, t1, t1      \
	VCVTDQ2PS   t3, t3           \
	VFMADD231PS t3, t1, acc

// REDUCE4 leaves the sums of Z0..Z3 in X0 (Y16-Y19 scratch, so that the
// 4x4 kernel's other accumulators survive).
#define REDUCE4 \
	VEXTRACTF64X4 $1, Z0, Y16 \
	VEXTRACTF64X4 $1, Z1, Y17 \
	VEXTRACTF64X4 $1, Z2, Y18 \
	VEXTRACTF64X4 $1, Z3, Y19 \
	VADDPS        Y16, Y0, Y0 \
	VADDPS        Y17, Y1, Y1 \
	VADDPS        Y18, Y2, Y2 \
	VADDPS        Y19, Y3, Y3 \
	VHADDPS       Y1, Y0, Y0 \
	VHADDPS       Y3, Y2, Y2 \
	VHADDPS       Y2, Y0, Y0 \
	VEXTRACTF128  $1, Y0, X1 \
	VADDPS        X1, X0, X0

#define REDUCE1 \
	VEXTRACTF64X4 $1, Z0, Y4 \
	VADDPS        Y4, Y0, Y0 \
	VEXTRACTF128  $1, Y0, X4 \
	VADDPS        X4, X0, X0 \
	VHADDPS       X0, X0, X0 \
	VHADDPS       X0, X0, X0

// STEP8 adds the eight rows' (AX, DX, R13, R14, R15, R9, DI, R12) four
// blocks at off, x's at xp, to Z0-Z7.
#define STEP8(off, xp) \
	VMOVDQU64 (xp), Z20    \
	VMOVDQU64 64(xp), Z21  \
	VMOVDQU64 128(xp), Z22 \
	VMOVDQU64 192(xp), Z23 \
	Q4ROW(AX, off, Z0, Z8, Z9, Y9, Z10, Z11)     \
	Q4ROW(DX, off, Z1, Z12, Z13, Y13, Z14, Z15)  \
	Q4ROW(R13, off, Z2, Z16, Z17, Y17, Z18, Z19) \
	Q4ROW(R14, off, Z3, Z24, Z25, Y25, Z26, Z27) \
	Q4ROW(R15, off, Z4, Z8, Z9, Y9, Z10, Z11)    \
	Q4ROW(R9, off, Z5, Z12, Z13, Y13, Z14, Z15)  \
	Q4ROW(DI, off, Z6, Z16, Z17, Y17, Z18, Z19)  \
	Q4ROW(R12, off, Z7, Z24, Z25, Y25, Z26, Z27)

// PF3ROWS applies pf (PF3, or PF3D for rows read downwards) at off to each
// of the rows eight ahead (addresses at 0-56(SP)).
#define PF3ROWS(pf, off) \
	pf(0, off, SI)  \
	pf(8, off, SI)  \
	pf(16, off, SI) \
	pf(24, off, SI) \
	pf(32, off, SI) \
	pf(40, off, SI) \
	pf(48, off, SI) \
	pf(56, off, SI)

// func gatherQ4v(out *float32, w *byte, stride int, rows *int32, n int, xs *byte, ngrp int, m1, m2 uint64, mid int)
// Eight or four rows at a time; the rows eight ahead are prefetched (PREFETCHT0)
// as the current ones are read, since q4_0 rows are too short for the
// hardware prefetcher. A last partial group of blocks is read with masks
// m1, m2 (m1 == 0: none).
//
// mid != 0: the eight-row loop reads each row's first half upwards and its
// second half downwards, so that the two runs meet inside the row. Read
// straight through, a row's end left the hardware prefetchers running on
// into rows no one asked for: a gather of scattered rows read ~20% faster
// this way (ops/avx2/NOTES.md). Rows that follow each other (a dense
// mat-vec) do better straight through.
TEXT ·gatherQ4v(SB), NOSPLIT, $80-80
	VPBROADCASTQ hinib<>(SB), Z28
	VMOVDQU64    q4perm<>(SB), Z30
	VMOVDQU64    q4wperm<>(SB), Z29
	VPBROADCASTD nib4<>(SB), Z31
	KMOVQ        m1+56(FP), K1
	KMOVQ        m2+64(FP), K2
	MOVQ         ngrp+48(FP), R11
	IMULQ        $72, R11
	XORQ         R12, R12

	// Eight rows at a time while no partial block group is left: more
	// rows in flight at once. k is kept at 64(SP) meanwhile.
g8loop:
	KORTESTQ K1, K1
	JNZ      g4loop
	ROWS8(g4loop)
	ZERO4(Z0, Z1, Z2, Z3)
	ZERO4(Z4, Z5, Z6, Z7)
	XORQ     CX, CX
	MOVQ     xs+40(FP), R10
	CMPQ     mid+72(FP), $0
	JNE      g8mid

g8blk:
	CMPQ CX, R11
	JGE  g8store
	STEP8(CX, R10)
	PF3ROWS(PF3, CX)
	ADDQ $72, CX
	ADDQ $256, R10
	JMP  g8blk

g8mid:
	// CX, R10 go up from the first block group, BX, R8 down from the last.
	LEAQ  -72(R11), BX
	MOVQ  ngrp+48(FP), R8
	DECQ  R8
	SHLQ  $8, R8
	ADDQ  R10, R8

g8pair:
	CMPQ CX, BX
	JGE  g8last
	STEP8(CX, R10)
	PF3ROWS(PF3, CX)
	STEP8(BX, R8)
	PF3ROWS(PF3D, BX)
	ADDQ $72, CX
	ADDQ $256, R10
	SUBQ $72, BX
	SUBQ $256, R8
	JMP  g8pair

g8last:
	// An odd count leaves the middle group.
	JNE g8store
	STEP8(CX, R10)

g8store:
	REDUCE4
	MOVQ      64(SP), R12
	MOVQ      out+0(FP), BX
	VMOVUPS   X0, (BX)(R12*4)
	VMOVAPS   Z4, Z0
	VMOVAPS   Z5, Z1
	VMOVAPS   Z6, Z2
	VMOVAPS   Z7, Z3
	REDUCE4
	VMOVUPS   X0, 16(BX)(R12*4)
	ADDQ      $8, R12
	JMP       g8loop

g4loop:
	ROWS4(g1loop)
	ZERO4(Z0, Z1, Z2, Z3)
	XORQ   CX, CX
	MOVQ   xs+40(FP), R10

g4blk:
	CMPQ      CX, R11
	JGE       g4tail
	VMOVDQU64 (R10), Z20
	VMOVDQU64 64(R10), Z21
	VMOVDQU64 128(R10), Z22
	VMOVDQU64 192(R10), Z23
	Q4ROW(AX, CX, Z0, Z4, Z5, Y5, Z6, Z7)
	Q4ROW(DX, CX, Z1, Z8, Z9, Y9, Z10, Z11)
	Q4ROW(R13, CX, Z2, Z12, Z13, Y13, Z14, Z15)
	Q4ROW(R14, CX, Z3, Z16, Z17, Y17, Z18, Z19)
	PF2(0, CX, DI)
	PF2(8, CX, DI)
	PF2(16, CX, DI)
	PF2(24, CX, DI)
	ADDQ $72, CX
	ADDQ $256, R10
	JMP  g4blk

g4tail:
	KORTESTQ  K1, K1
	JZ        g4store
	VMOVDQU64 (R10), Z20
	VMOVDQU64 64(R10), Z21
	VMOVDQU64 128(R10), Z22
	VMOVDQU64 192(R10), Z23
	Q4TAIL(AX, Z0, Z4, Z5, Y5, Z6, Z7)
	Q4TAIL(DX, Z1, Z8, Z9, Y9, Z10, Z11)
	Q4TAIL(R13, Z2, Z12, Z13, Y13, Z14, Z15)
	Q4TAIL(R14, Z3, Z16, Z17, Y17, Z18, Z19)

g4store:
	REDUCE4
	MOVQ    out+0(FP), DI
	VMOVUPS X0, (DI)(R12*4)
	ADDQ    $4, R12
	JMP     g4loop

g1loop:
	ROW1(gdone)
	VPXORD Z0, Z0, Z0
	XORQ   CX, CX
	MOVQ   xs+40(FP), R10

g1blk:
	CMPQ      CX, R11
	JGE       g1tail
	VMOVDQU64 (R10), Z20
	VMOVDQU64 64(R10), Z21
	VMOVDQU64 128(R10), Z22
	VMOVDQU64 192(R10), Z23
	Q4ROW(AX, CX, Z0, Z4, Z5, Y5, Z6, Z7)
	ADDQ $72, CX
	ADDQ $256, R10
	JMP  g1blk

g1tail:
	KORTESTQ  K1, K1
	JZ        g1store
	VMOVDQU64 (R10), Z20
	VMOVDQU64 64(R10), Z21
	VMOVDQU64 128(R10), Z22
	VMOVDQU64 192(R10), Z23
	Q4TAIL(AX, Z0, Z4, Z5, Y5, Z6, Z7)

g1store:
	REDUCE1
	MOVQ  out+0(FP), DI
	VMOVSS X0, (DI)(R12*4)
	INCQ  R12
	JMP   g1loop

gdone:
	VZEROUPPER
	RET

// Q4DEC decodes one row's four blocks at p+CX into nibbles lo, hi and the
// scales sw (one per int32 lane); the controls are in Z28 and Z29.
#define Q4DEC(p, lo, hi, sw, swy) \
	VMOVDQU64       (p)(CX*1), lo       \
	VPERMW          lo, Z29, sw         \
	VPERMT2B        8(p)(CX*1), Z28, lo \
	VCVTPH2PS       swy, sw             \
	VPSRLW          $4, lo, hi          \
	VPANDD.BCST     nib4<>(SB), lo, lo  \
	VPANDD.BCST     nib4<>(SB), hi, hi

// Q4MAC adds one decoded row times the token whose x halves are in Z28,
// Z29 (corr and d_x at xr) to acc.
#define Q4MAC(xr, lo, hi, sw, acc) \
	VMOVDQA64   128(xr), Z30 \
	VPDPBUSD    Z28, lo, Z30 \
	VPDPBUSD    Z29, hi, Z30 \
	VMULPS      192(xr), sw, Z31 \
	VCVTDQ2PS   Z30, Z30 \
	VFMADD231PS Z30, Z31, acc

// Q4TOK: one token's x halves are loaded once for the four rows, which
// keeps the loads within what the two load ports give.
#define Q4TOK(xr, a0, a1, a2, a3) \
	VMOVDQU64 (xr), Z28 \
	VMOVDQU64 64(xr), Z29 \
	Q4MAC(xr, Z16, Z17, Z18, a0) \
	Q4MAC(xr, Z19, Z20, Z21, a1) \
	Q4MAC(xr, Z22, Z23, Z24, a2) \
	Q4MAC(xr, Z25, Z26, Z27, a3)

// func gatherQ4v4(out *float32, ldo int, w *byte, stride int, rows *int32, n int, xs *byte, xstride int, ngrp int)
// Four rows by four tokens: each weight block is decoded once for the four
// tokens (prepared by prepQ4x, xstride bytes apart), and out[t*ldo+k] gets
// row rows[k] times token t. n is a multiple of 4; no partial block groups.
TEXT ·gatherQ4v4(SB), NOSPLIT, $32-72
	MOVQ      ngrp+64(FP), R15
	IMULQ     $72, R15
	XORQ      R12, R12

m4loop:
	CMPQ R12, n+40(FP)
	JGE  mdone
	MOVQ rows+32(FP), R8
	MOVQ w+16(FP), SI
	MOVQ stride+24(FP), BX
	ROWPTR(0, R12, AX)
	ROWPTR(1, R12, DX)
	ROWPTR(2, R12, R13)
	ROWPTR(3, R12, R14)
	// The next group's rows stream in while this one is computed.
	MOVQ   n+40(FP), R9
	DECQ   R9
	PFPTR(4, 0)
	PFPTR(5, 8)
	PFPTR(6, 16)
	PFPTR(7, 24)
	ZERO4(Z0, Z1, Z2, Z3)
	ZERO4(Z4, Z5, Z6, Z7)
	ZERO4(Z8, Z9, Z10, Z11)
	ZERO4(Z12, Z13, Z14, Z15)
	MOVQ   xstride+56(FP), BX
	MOVQ   xs+48(FP), R8
	LEAQ   (R8)(BX*1), R9
	LEAQ   (R9)(BX*1), R10
	LEAQ   (R10)(BX*1), R11
	XORQ   CX, CX

m4blk:
	CMPQ      CX, R15
	JGE       m4store
	VMOVDQU64 q4perm<>(SB), Z28
	VMOVDQU64 q4wperm<>(SB), Z29
	Q4DEC(AX, Z16, Z17, Z18, Y18)
	Q4DEC(DX, Z19, Z20, Z21, Y21)
	Q4DEC(R13, Z22, Z23, Z24, Y24)
	Q4DEC(R14, Z25, Z26, Z27, Y27)
	Q4TOK(R8, Z0, Z1, Z2, Z3)
	Q4TOK(R9, Z4, Z5, Z6, Z7)
	Q4TOK(R10, Z8, Z9, Z10, Z11)
	Q4TOK(R11, Z12, Z13, Z14, Z15)
	PF2(0, CX, DI)
	PF2(8, CX, DI)
	PF2(16, CX, DI)
	PF2(24, CX, DI)
	ADDQ $72, CX
	ADDQ $256, R8
	ADDQ $256, R9
	ADDQ $256, R10
	ADDQ $256, R11
	JMP  m4blk

m4store:
	MOVQ out+0(FP), DI
	LEAQ (DI)(R12*4), DI
	MOVQ ldo+8(FP), BX
	SHLQ $2, BX
	REDUCE4
	VMOVUPS X0, (DI)
	ADDQ    BX, DI
	VMOVAPS Z4, Z0
	VMOVAPS Z5, Z1
	VMOVAPS Z6, Z2
	VMOVAPS Z7, Z3
	REDUCE4
	VMOVUPS X0, (DI)
	ADDQ    BX, DI
	VMOVAPS Z8, Z0
	VMOVAPS Z9, Z1
	VMOVAPS Z10, Z2
	VMOVAPS Z11, Z3
	REDUCE4
	VMOVUPS X0, (DI)
	ADDQ    BX, DI
	VMOVAPS Z12, Z0
	VMOVAPS Z13, Z1
	VMOVAPS Z14, Z2
	VMOVAPS Z15, Z3
	REDUCE4
	VMOVUPS X0, (DI)
	ADDQ    $4, R12
	JMP     m4loop

mdone:
	VZEROUPPER
	RET

// Q4AXPY adds coef·d·(q-8) of one row's block at p+CX to Z16 (elements
// 0-15) and Z17 (16-31); VPERMPS looks q-8 up by the low four bits of each
// lane, so the low nibble needs no mask.
#define Q4AXPY(p, c, s, sy, t, u) \
	VPBROADCASTW (p)(CX*1), sy \
	VCVTPH2PS    sy, s          \
	VMULPS       c, s, s        \
	Q4AXPYS(p, s, t, u, Z16, Z17)

// Q4AXPYS is Q4AXPY with the row's scale coef·d already in s.
#define Q4AXPYS(p, s, t, u, y0, y1) \
	VPMOVZXBD    2(p)(CX*1), t  \
	VPERMPS      Z28, t, u      \
	VPSRLD       $4, t, t       \
	VPERMPS      Z28, t, t      \
	VFMADD231PS  u, s, y0       \
	VFMADD231PS  t, s, y1

// func axpyQ4v(y *float32, w *byte, stride int, rows *int32, n int, coef *float32, nblk int)
TEXT ·axpyQ4v(SB), NOSPLIT, $48-56
	VMOVUPS q4tab<>(SB), Z28
	XORQ    R12, R12

a4loop:
	ROWS4(a1loop)
	MOVQ         coef+40(FP), DI
	VMOVUPS      (DI)(R12*4), X13
	MOVQ         y+0(FP), R10
	MOVQ         nblk+48(FP), R11
	XORQ         CX, CX

a4blk:
	TESTQ   R11, R11
	JZ      a4next
	PACKD
	VMOVQ        DI, X12
	VCVTPH2PS    X12, X12
	VMULPS       X13, X12, X12
	VMOVUPS      X12, 32(SP)
	VBROADCASTSS 32(SP), Z0
	VBROADCASTSS 36(SP), Z3
	VBROADCASTSS 40(SP), Z6
	VBROADCASTSS 44(SP), Z9
	VMOVUPS      (R10), Z16
	VMOVUPS      64(R10), Z17
	Q4AXPYS(AX, Z0, Z1, Z2, Z16, Z17)
	Q4AXPYS(DX, Z3, Z4, Z5, Z16, Z17)
	Q4AXPYS(R13, Z6, Z7, Z8, Z16, Z17)
	Q4AXPYS(R14, Z9, Z10, Z11, Z16, Z17)
	VMOVUPS Z16, (R10)
	VMOVUPS Z17, 64(R10)
	// One prefetch per line: the block that starts in its first 18 bytes.
	MOVQ    CX, DI
	ANDQ    $63, DI
	CMPQ    DI, $18
	JAE     a4nopf
	PF(0, CX)
	PF(8, CX)
	PF(16, CX)
	PF(24, CX)

a4nopf:
	ADDQ $18, CX
	ADDQ $128, R10
	DECQ R11
	JMP  a4blk

a4next:
	ADDQ $4, R12
	JMP  a4loop

a1loop:
	ROW1(adone)
	MOVQ         coef+40(FP), DI
	VBROADCASTSS (DI)(R12*4), Z24
	MOVQ         y+0(FP), R10
	MOVQ         nblk+48(FP), R11
	XORQ         CX, CX

a1blk:
	TESTQ   R11, R11
	JZ      a1next
	VMOVUPS (R10), Z16
	VMOVUPS 64(R10), Z17
	Q4AXPY(AX, Z24, Z0, Y0, Z1, Z2)
	VMOVUPS Z16, (R10)
	VMOVUPS Z17, 64(R10)
	ADDQ    $18, CX
	ADDQ    $128, R10
	DECQ    R11
	JMP     a1blk

a1next:
	INCQ R12
	JMP  a1loop

adone:
	VZEROUPPER
	RET

// Q8F adds d·(q·x) of one q8_0 row's block at p+CX, x in Z20/Z21, to acc.
#define Q8F(p, acc, a, b, s, sy) \
	VPBROADCASTW (p)(CX*1), sy  \
	VCVTPH2PS    sy, s          \
	Q8FS(p, acc, a, b, s)

// Q8FS is Q8F with the block's d already broadcast in s.
#define Q8FS(p, acc, a, b, s) \
	VPMOVSXBD    2(p)(CX*1), a  \
	VPMOVSXBD    18(p)(CX*1), b \
	VCVTDQ2PS    a, a           \
	VCVTDQ2PS    b, b           \
	VMULPS       Z20, a, a      \
	VFMADD231PS  Z21, b, a      \
	VFMADD231PS  a, s, acc

// func gatherQ8f(out *float32, w *byte, stride int, rows *int32, n int, x *float32, nblk int)
// q8_0 rows times f32 activations: the weights are widened in registers,
// so x keeps its full precision.
TEXT ·gatherQ8f(SB), NOSPLIT, $48-56
	MOVQ  nblk+48(FP), R11
	IMULQ $34, R11
	XORQ  R12, R12

f4loop:
	ROWS4(f1loop)
	ZERO4(Z0, Z1, Z2, Z3)
	XORQ   CX, CX
	MOVQ   x+40(FP), R10

f4blk:
	CMPQ    CX, R11
	JGE     f4store
	VMOVUPS      (R10), Z20
	VMOVUPS      64(R10), Z21
	PACKD
	VMOVQ        DI, X12
	VCVTPH2PS    X12, X12
	VMOVUPS      X12, 32(SP)
	VBROADCASTSS 32(SP), Z4
	VBROADCASTSS 36(SP), Z5
	VBROADCASTSS 40(SP), Z6
	VBROADCASTSS 44(SP), Z7
	Q8FS(AX, Z0, Z16, Z17, Z4)
	Q8FS(DX, Z1, Z18, Z19, Z5)
	Q8FS(R13, Z2, Z22, Z23, Z6)
	Q8FS(R14, Z3, Z24, Z25, Z7)
	PF(0, CX)
	PF(8, CX)
	PF(16, CX)
	PF(24, CX)
	ADDQ $34, CX
	ADDQ $128, R10
	JMP  f4blk

f4store:
	REDUCE4
	MOVQ    out+0(FP), DI
	VMOVUPS X0, (DI)(R12*4)
	ADDQ    $4, R12
	JMP     f4loop

f1loop:
	ROW1(fdone)
	VPXORD Z0, Z0, Z0
	XORQ   CX, CX
	MOVQ   x+40(FP), R10

f1blk:
	CMPQ    CX, R11
	JGE     f1store
	VMOVUPS (R10), Z20
	VMOVUPS 64(R10), Z21
	Q8F(AX, Z0, Z16, Z17, Z4, Y4)
	ADDQ $34, CX
	ADDQ $128, R10
	JMP  f1blk

f1store:
	REDUCE1
	MOVQ   out+0(FP), DI
	VMOVSS X0, (DI)(R12*4)
	INCQ   R12
	JMP    f1loop

fdone:
	VZEROUPPER
	RET

DATA absmask<>+0(SB)/4, $0x7fffffff
GLOBL absmask<>(SB), RODATA|NOPTR, $4
DATA signmask<>+0(SB)/4, $0x80000000
GLOBL signmask<>(SB), RODATA|NOPTR, $4
DATA one<>+0(SB)/4, $0x3f800000
GLOBL one<>(SB), RODATA|NOPTR, $4
DATA half<>+0(SB)/4, $0x3f000000
GLOBL half<>(SB), RODATA|NOPTR, $4
DATA f127<>+0(SB)/4, $0x42fe0000
GLOBL f127<>(SB), RODATA|NOPTR, $4

// QROUND rounds y (scaled x) half away from zero, as math.Round does, and
// packs it to 16 int8 at dst: trunc, then one step away from zero where
// the dropped fraction is at least one half.
#define QROUND(y, dst) \
	VRNDSCALEPS       $0x0b, y, Z8   \
	VSUBPS            Z8, y, Z9      \
	VANDPS.BCST       absmask<>(SB), Z9, Z9 \
	VCMPPS.BCST       $0x0d, half<>(SB), Z9, K1 \
	VANDPS.BCST       signmask<>(SB), y, Z10 \
	VORPS.BCST        one<>(SB), Z10, Z10 \
	VADDPS            Z10, Z8, K1, Z8 \
	VCVTTPS2DQ        Z8, Z8         \
	VPMOVSDB          Z8, dst

// func quantQ8v(dst *byte, x *float32, nblk int)
// q8_0 as quantizeQ8 (generic.go) computes it: d = amax/127 as f16,
// q = round(x·(1/d)) half away from zero, 0 where d is 0 as f16.
TEXT ·quantQ8v(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ nblk+16(FP), DX
	VBROADCASTSS f127<>(SB), X14
	VBROADCASTSS one<>(SB), X15
	VXORPS       X13, X13, X13

qloop:
	TESTQ         DX, DX
	JZ            qdone
	VMOVUPS       (SI), Z0
	VMOVUPS       64(SI), Z1
	VANDPS.BCST   absmask<>(SB), Z0, Z2
	VANDPS.BCST   absmask<>(SB), Z1, Z3
	VMAXPS        Z3, Z2, Z2
	VEXTRACTF64X4 $1, Z2, Y3
	VMAXPS        Y3, Y2, Y2
	HMAX8(Y2, X2, X3)
	VDIVSS        X14, X2, X4
	VDIVSS        X4, X15, X5
	VCVTPS2PH     $0, X4, X6
	VPEXTRW       $0, X6, AX
	MOVW          AX, (DI)
	TESTL         $0x7fff, AX
	JNZ           qscale
	VXORPS        X5, X5, X5 // d is 0 as f16: so are the q

qscale:
	VBROADCASTSS  X5, Z5
	VMULPS        Z5, Z0, Z0
	VMULPS        Z5, Z1, Z1
	QROUND(Z0, X11)
	QROUND(Z1, X12)
	VMOVDQU       X11, 2(DI)
	VMOVDQU       X12, 18(DI)
	ADDQ          $128, SI
	ADDQ          $34, DI
	DECQ          DX
	JMP           qloop

qdone:
	VZEROUPPER
	RET

// q8perm: VPERMT2B control gathering the 32 int8 of each of two q8_0
// blocks (68 bytes, read as [0,64) and [4,68)) into one zmm.
DATA q8perm<>+0(SB)/8, $0x0908070605040302
DATA q8perm<>+8(SB)/8, $0x11100f0e0d0c0b0a
DATA q8perm<>+16(SB)/8, $0x1918171615141312
DATA q8perm<>+24(SB)/8, $0x21201f1e1d1c1b1a
DATA q8perm<>+32(SB)/8, $0x6766656463626160
DATA q8perm<>+40(SB)/8, $0x6f6e6d6c6b6a6968
DATA q8perm<>+48(SB)/8, $0x7776757473727170
DATA q8perm<>+56(SB)/8, $0x7f7e7d7c7b7a7978
GLOBL q8perm<>(SB), RODATA|NOPTR, $64

// q8wperm: VPERMW control spreading the two blocks' scales (words 0, 17)
// over eight words each.
DATA q8wperm<>+0(SB)/8, $0x0000000000000000
DATA q8wperm<>+8(SB)/8, $0x0000000000000000
DATA q8wperm<>+16(SB)/8, $0x0011001100110011
DATA q8wperm<>+24(SB)/8, $0x0011001100110011
DATA q8wperm<>+32(SB)/8, $0x0000000000000000
DATA q8wperm<>+40(SB)/8, $0x0000000000000000
DATA q8wperm<>+48(SB)/8, $0x0000000000000000
DATA q8wperm<>+56(SB)/8, $0x0000000000000000
GLOBL q8wperm<>(SB), RODATA|NOPTR, $64

DATA x80<>+0(SB)/4, $0x80808080
GLOBL x80<>(SB), RODATA|NOPTR, $4

// Q8ROW adds one q8_0 row's two blocks at p+CX (x, corr and d_x in Z20-Z22)
// to acc.
#define Q8ROW(p, off, acc, t0, t1, t1y, t2, t3) \
	VMOVDQU64   (p)(off*1), t0    \
	VPERMW      t0, Z29, t1      \
	VPERMT2B    4(p)(off*1), Z30, t0 \
	VCVTPH2PS   t1y, t1          \
	VPXORD      Z31, t0, t0      \
	VMOVDQA64   Z21, t3          \
	VPDPBUSD    Z20, t0, t3      \
	VMULPS      Z22, t1, t1      \
	VCVTDQ2PS   t3, t3           \
	VFMADD231PS t3, t1, acc

// Q8TAIL is Q8ROW over a last single block, with masked loads.
#define Q8TAIL(p, acc, t0, t1, t1y, t2, t3) \
	VMOVDQU8.Z  (p)(CX*1), K1, t0  \
	VMOVDQU8.Z  4(p)(CX*1), K2, t2 \
	VPERMW      t0, Z29, t1      \
	VPERMT2B    t2, Z30, t0      \
	VCVTPH2PS   t1y, t1          \
	VPXORD      Z31, t0, t0      \
	VMOVDQA64   Z21, t3          \
	VPDPBUSD    Z20, t0, t3      \
	VMULPS      Z22, t1, t1      \
	VCVTDQ2PS   t3, t3           \
	VFMADD231PS t3, t1, acc

// func prepQ8x(xs *byte, xq *byte, nblk int)
// Per pair of q8_0 activation blocks, 192 bytes of xs: both blocks' x
// [0,64), -128·Σx per int32 lane [64,128), d_x per lane [128,192).
TEXT ·prepQ8x(SB), NOSPLIT, $0-24
	MOVQ         xs+0(FP), DI
	MOVQ         xq+8(FP), SI
	MOVQ         nblk+16(FP), DX
	VPBROADCASTD x80<>(SB), Y15
	VPXORD       Y14, Y14, Y14
	XORQ         CX, CX

p8loop:
	TESTQ        DX, DX
	JZ           p8done
	VMOVDQU      2(SI), Y0
	VPXORD       Y1, Y1, Y1
	VPDPBUSD     Y0, Y15, Y1
	VPSUBD       Y1, Y14, Y1
	VPBROADCASTW (SI), X3
	VCVTPH2PS    X3, Y3
	VMOVDQU      Y0, (DI)(CX*1)
	VMOVDQU      Y1, 64(DI)(CX*1)
	VMOVUPS      Y3, 128(DI)(CX*1)
	ADDQ         $34, SI
	ADDQ         $32, CX
	CMPQ         CX, $64
	JLT          p8next
	XORQ         CX, CX
	ADDQ         $192, DI

p8next:
	DECQ DX
	JMP  p8loop

p8done:
	VZEROUPPER
	RET

// func gatherQ8v(out *float32, w *byte, stride int, rows *int32, n int, xs *byte, npair int, m1, m2 uint64)
// Q8STEP4 adds the four rows' (AX, DX, R13, R14) two blocks at off, x's
// at xp, to Z0-Z3, and prefetches the same bytes of the rows eight ahead.
#define Q8STEP4(off, xp) \
	VMOVDQU64 (xp), Z20    \
	VMOVDQU64 64(xp), Z21  \
	VMOVDQU64 128(xp), Z22 \
	Q8ROW(AX, off, Z0, Z4, Z5, Y5, Z6, Z7)     \
	Q8ROW(DX, off, Z1, Z8, Z9, Y9, Z10, Z11)   \
	Q8ROW(R13, off, Z2, Z12, Z13, Y13, Z14, Z15) \
	Q8ROW(R14, off, Z3, Z16, Z17, Y17, Z18, Z19) \
	PF2(0, off, DI)  \
	PF2(8, off, DI)  \
	PF2(16, off, DI) \
	PF2(24, off, DI)

// gatherQ4v for q8_0 rows, two blocks per step, x prepared by prepQ8x: the
// weights are made unsigned by flipping their sign bit (w+128), and the
// corr lanes take the 128·Σx that adds back out. mid as in gatherQ4v:
// scattered rows are read from both ends when no partial pair is left.
TEXT ·gatherQ8v(SB), NOSPLIT, $32-80
	VMOVDQU64    q8perm<>(SB), Z30
	VMOVDQU64    q8wperm<>(SB), Z29
	VPBROADCASTD x80<>(SB), Z31
	KMOVQ        m1+56(FP), K1
	KMOVQ        m2+64(FP), K2
	MOVQ         npair+48(FP), R11
	IMULQ        $68, R11
	XORQ         R12, R12

q84loop:
	ROWS4(q81loop)
	ZERO4(Z0, Z1, Z2, Z3)
	XORQ   CX, CX
	MOVQ   xs+40(FP), R10
	KORTESTQ K1, K1
	JNZ      q84blk
	CMPQ     mid+72(FP), $0
	JNE      q84mid

q84blk:
	CMPQ CX, R11
	JGE  q84tail
	Q8STEP4(CX, R10)
	ADDQ $68, CX
	ADDQ $192, R10
	JMP  q84blk

q84mid:
	// CX, R10 go up from the first pair of blocks, BX, R8 down from the
	// last.
	LEAQ  -68(R11), BX
	MOVQ  npair+48(FP), R8
	DECQ  R8
	IMULQ $192, R8
	ADDQ  R10, R8

q84pair:
	CMPQ CX, BX
	JGE  q84last
	Q8STEP4(CX, R10)
	Q8STEP4(BX, R8)
	ADDQ $68, CX
	ADDQ $192, R10
	SUBQ $68, BX
	SUBQ $192, R8
	JMP  q84pair

q84last:
	JNE q84store
	Q8STEP4(CX, R10)
	JMP q84store

q84tail:
	KORTESTQ  K1, K1
	JZ        q84store
	VMOVDQU64 (R10), Z20
	VMOVDQU64 64(R10), Z21
	VMOVDQU64 128(R10), Z22
	Q8TAIL(AX, Z0, Z4, Z5, Y5, Z6, Z7)
	Q8TAIL(DX, Z1, Z8, Z9, Y9, Z10, Z11)
	Q8TAIL(R13, Z2, Z12, Z13, Y13, Z14, Z15)
	Q8TAIL(R14, Z3, Z16, Z17, Y17, Z18, Z19)

q84store:
	REDUCE4
	MOVQ    out+0(FP), DI
	VMOVUPS X0, (DI)(R12*4)
	ADDQ    $4, R12
	JMP     q84loop

q81loop:
	ROW1(q8done)
	VPXORD Z0, Z0, Z0
	XORQ   CX, CX
	MOVQ   xs+40(FP), R10

q81blk:
	CMPQ      CX, R11
	JGE       q81tail
	VMOVDQU64 (R10), Z20
	VMOVDQU64 64(R10), Z21
	VMOVDQU64 128(R10), Z22
	Q8ROW(AX, CX, Z0, Z4, Z5, Y5, Z6, Z7)
	ADDQ $68, CX
	ADDQ $192, R10
	JMP  q81blk

q81tail:
	KORTESTQ  K1, K1
	JZ        q81store
	VMOVDQU64 (R10), Z20
	VMOVDQU64 64(R10), Z21
	VMOVDQU64 128(R10), Z22
	Q8TAIL(AX, Z0, Z4, Z5, Y5, Z6, Z7)

q81store:
	REDUCE1
	MOVQ  out+0(FP), DI
	VMOVSS X0, (DI)(R12*4)
	INCQ  R12
	JMP   q81loop

q8done:
	VZEROUPPER
	RET


// i8perm: VPERMB indexes that turn four rows' 16 bytes of a block (row r in
// bytes 16r..16r+15) into one dword per byte position j holding the four
// rows' bytes j, row 0 lowest: the order VPDPBUSD sums over.
DATA i8perm<>+0(SB)/8, $0x3121110130201000
DATA i8perm<>+8(SB)/8, $0x3323130332221202
DATA i8perm<>+16(SB)/8, $0x3525150534241404
DATA i8perm<>+24(SB)/8, $0x3727170736261606
DATA i8perm<>+32(SB)/8, $0x3929190938281808
DATA i8perm<>+40(SB)/8, $0x3b2b1b0b3a2a1a0a
DATA i8perm<>+48(SB)/8, $0x3d2d1d0d3c2c1c0c
DATA i8perm<>+56(SB)/8, $0x3f2f1f0f3e2e1e0e
GLOBL i8perm<>(SB), RODATA|NOPTR, $64

DATA inv127<>+0(SB)/4, $0x3c010204  // float32(1/127)
GLOBL inv127<>(SB), RODATA|NOPTR, $4
DATA tiny<>+0(SB)/4, $0x0da24260    // 1e-30: the scale of a block whose coefficients are all zero
GLOBL tiny<>(SB), RODATA|NOPTR, $4

// The first pass's VPERMT2W/B/D/Q indexes, sixteen blocks at a time:
// i8dlo/hi pick the f16 scales of blocks 0-7 / 8-15 (words 9i of 144 bytes)
// into words 0-7 / 8-15; i8qlo/hi turn the eight rows' int8 q of 16 blocks
// (row r's 16 bytes in lane r%4 of the first table for r < 4, of the
// second for r >= 4) into eight bytes per block; i8sclo/hi pair each
// block's s and -8·Σq; i8rlo/hi interleave q and that pair into the
// 16-byte records.
DATA i8dlo<>+0(SB)/8, $0x001b001200090000
DATA i8dlo<>+8(SB)/8, $0x003f0036002d0024
DATA i8dlo<>+16(SB)/8, $0x0000000000000000
DATA i8dlo<>+24(SB)/8, $0x0000000000000000
DATA i8dlo<>+32(SB)/8, $0x0000000000000000
DATA i8dlo<>+40(SB)/8, $0x0000000000000000
DATA i8dlo<>+48(SB)/8, $0x0000000000000000
DATA i8dlo<>+56(SB)/8, $0x0000000000000000
GLOBL i8dlo<>(SB), RODATA|NOPTR, $64
DATA i8dhi<>+0(SB)/8, $0x0000000000000000
DATA i8dhi<>+8(SB)/8, $0x0000000000000000
DATA i8dhi<>+16(SB)/8, $0x001b001200090000
DATA i8dhi<>+24(SB)/8, $0x003f0036002d0024
DATA i8dhi<>+32(SB)/8, $0x0000000000000000
DATA i8dhi<>+40(SB)/8, $0x0000000000000000
DATA i8dhi<>+48(SB)/8, $0x0000000000000000
DATA i8dhi<>+56(SB)/8, $0x0000000000000000
GLOBL i8dhi<>(SB), RODATA|NOPTR, $64
DATA i8qlo<>+0(SB)/8, $0x7060504030201000
DATA i8qlo<>+8(SB)/8, $0x7161514131211101
DATA i8qlo<>+16(SB)/8, $0x7262524232221202
DATA i8qlo<>+24(SB)/8, $0x7363534333231303
DATA i8qlo<>+32(SB)/8, $0x7464544434241404
DATA i8qlo<>+40(SB)/8, $0x7565554535251505
DATA i8qlo<>+48(SB)/8, $0x7666564636261606
DATA i8qlo<>+56(SB)/8, $0x7767574737271707
GLOBL i8qlo<>(SB), RODATA|NOPTR, $64
DATA i8qhi<>+0(SB)/8, $0x7868584838281808
DATA i8qhi<>+8(SB)/8, $0x7969594939291909
DATA i8qhi<>+16(SB)/8, $0x7a6a5a4a3a2a1a0a
DATA i8qhi<>+24(SB)/8, $0x7b6b5b4b3b2b1b0b
DATA i8qhi<>+32(SB)/8, $0x7c6c5c4c3c2c1c0c
DATA i8qhi<>+40(SB)/8, $0x7d6d5d4d3d2d1d0d
DATA i8qhi<>+48(SB)/8, $0x7e6e5e4e3e2e1e0e
DATA i8qhi<>+56(SB)/8, $0x7f6f5f4f3f2f1f0f
GLOBL i8qhi<>(SB), RODATA|NOPTR, $64

// i16tr transposes each lane's 4x4 bytes (row-major to block-major);
// eight8 is the u8 operand that sums 8·q.
DATA i16tr<>+0(SB)/8, $0x0d0905010c080400
DATA i16tr<>+8(SB)/8, $0x0f0b07030e0a0602
DATA i16tr<>+16(SB)/8, $0x0d0905010c080400
DATA i16tr<>+24(SB)/8, $0x0f0b07030e0a0602
DATA i16tr<>+32(SB)/8, $0x0d0905010c080400
DATA i16tr<>+40(SB)/8, $0x0f0b07030e0a0602
DATA i16tr<>+48(SB)/8, $0x0d0905010c080400
DATA i16tr<>+56(SB)/8, $0x0f0b07030e0a0602
GLOBL i16tr<>(SB), RODATA|NOPTR, $64
DATA eight8<>+0(SB)/4, $0x08080808
GLOBL eight8<>(SB), RODATA|NOPTR, $4
DATA i8sclo<>+0(SB)/8, $0x0000001000000000
DATA i8sclo<>+8(SB)/8, $0x0000001100000001
DATA i8sclo<>+16(SB)/8, $0x0000001200000002
DATA i8sclo<>+24(SB)/8, $0x0000001300000003
DATA i8sclo<>+32(SB)/8, $0x0000001400000004
DATA i8sclo<>+40(SB)/8, $0x0000001500000005
DATA i8sclo<>+48(SB)/8, $0x0000001600000006
DATA i8sclo<>+56(SB)/8, $0x0000001700000007
GLOBL i8sclo<>(SB), RODATA|NOPTR, $64
DATA i8schi<>+0(SB)/8, $0x0000001800000008
DATA i8schi<>+8(SB)/8, $0x0000001900000009
DATA i8schi<>+16(SB)/8, $0x0000001a0000000a
DATA i8schi<>+24(SB)/8, $0x0000001b0000000b
DATA i8schi<>+32(SB)/8, $0x0000001c0000000c
DATA i8schi<>+40(SB)/8, $0x0000001d0000000d
DATA i8schi<>+48(SB)/8, $0x0000001e0000000e
DATA i8schi<>+56(SB)/8, $0x0000001f0000000f
GLOBL i8schi<>(SB), RODATA|NOPTR, $64
DATA i8rlo<>+0(SB)/8, $0x0000000000000000
DATA i8rlo<>+8(SB)/8, $0x0000000000000008
DATA i8rlo<>+16(SB)/8, $0x0000000000000001
DATA i8rlo<>+24(SB)/8, $0x0000000000000009
DATA i8rlo<>+32(SB)/8, $0x0000000000000002
DATA i8rlo<>+40(SB)/8, $0x000000000000000a
DATA i8rlo<>+48(SB)/8, $0x0000000000000003
DATA i8rlo<>+56(SB)/8, $0x000000000000000b
GLOBL i8rlo<>(SB), RODATA|NOPTR, $64
DATA i8rhi<>+0(SB)/8, $0x0000000000000004
DATA i8rhi<>+8(SB)/8, $0x000000000000000c
DATA i8rhi<>+16(SB)/8, $0x0000000000000005
DATA i8rhi<>+24(SB)/8, $0x000000000000000d
DATA i8rhi<>+32(SB)/8, $0x0000000000000006
DATA i8rhi<>+40(SB)/8, $0x000000000000000e
DATA i8rhi<>+48(SB)/8, $0x0000000000000007
DATA i8rhi<>+56(SB)/8, $0x000000000000000f
GLOBL i8rhi<>(SB), RODATA|NOPTR, $64

// I8BYTES sets Z28 to four rows' nibble bytes of block i of the sixteen
// at CX, interleaved so that dword k holds byte k of each row.
#define I8BYTES(i, p0, p1, p2, p3) \
	VMOVDQU64     (2+18*i)(p0)(CX*1), X28          \
	VINSERTI32X4  $1, (2+18*i)(p1)(CX*1), Y28, Y28 \
	VMOVDQU64     (2+18*i)(p2)(CX*1), X29          \
	VINSERTI32X4  $1, (2+18*i)(p3)(CX*1), Y29, Y29 \
	VINSERTI64X4  $1, Y29, Z28, Z28                \
	VPERMB        Z28, Z30, Z28

// I8ROWS adds four rows' products with block i of the sixteen at CX to
// Z25 (bytes 0-15) and Z26 (bytes 16-31): q is the rows' four int8
// coefficients, a dword broadcast from memory; the nibbles stay unsigned
// (the -8 is in Z25/Z26's start value).
#define I8ROWS(i, p0, p1, p2, p3, q) \
	I8BYTES(i, p0, p1, p2, p3)                     \
	VPSRLW        $4, Z28, Z29                     \
	VPANDD        Z31, Z28, Z28                    \
	VPANDD        Z31, Z29, Z29                    \
	VPDPBUSD.BCST q, Z28, Z25                      \
	VPDPBUSD.BCST q, Z29, Z26

// I8BLK: y (R10) += s·Σ q·(nibble-8) over the eight rows for block i of
// the sixteen at CX, its record at i*16(BX).
#define I8BLK(i) \
	VPBROADCASTD (16*i+12)(BX), Z25                \
	VMOVDQA64    Z25, Z26                          \
	I8ROWS(i, AX, DX, R13, R14, (16*i)(BX))        \
	I8ROWS(i, R15, R9, DI, R12, (16*i+4)(BX))      \
	VCVTDQ2PS    Z25, Z25                          \
	VCVTDQ2PS    Z26, Z26                          \
	VBROADCASTSS (16*i+8)(BX), Z27                 \
	VFMADD213PS  (128*i)(R10), Z27, Z25            \
	VFMADD213PS  (128*i+64)(R10), Z27, Z26         \
	VMOVUPS      Z25, (128*i)(R10)                 \
	VMOVUPS      Z26, (128*i+64)(R10)

// PF8 prefetches the three lines from off+CX of each row eight ahead
// (addresses at 0-56(SP)): five of them cover a row's sixteen blocks about
// three times over, as PF3 does for the mat-vec. With one line each (once
// over), two threads read 2-9% slower (ops/avx2/NOTES.md), as if some
// prefetches were dropped.
#define PFL(slot, off) \
	MOVQ       slot(SP), SI           \
	PREFETCHT1 off(SI)(CX*1)          \
	PREFETCHT1 (off+64)(SI)(CX*1)     \
	PREFETCHT1 (off+128)(SI)(CX*1)

// EACH8 applies pfl to the eight row addresses at s..s+56(SP); PF8S is
// PF8 for them.
#define EACH8(pfl, s, off) \
	pfl(s, off)      \
	pfl((s+8), off)  \
	pfl((s+16), off) \
	pfl((s+24), off) \
	pfl((s+32), off) \
	pfl((s+40), off) \
	pfl((s+48), off) \
	pfl((s+56), off)

#define PF8S(s, off) EACH8(PFL, s, off)

#define PF8(off) PF8S(0, off)

// The records of sixteen blocks at off+CX, in steps that the second pass
// can take between its blocks. I8D sets zd to row p's coef (at r*4(R8))
// times the rows' f16 scales.
#define I8D(off, p, r, zd) \
	VMOVDQU64   off(p)(CX*1), Z8             \
	VPERMT2W    (off+64)(p)(CX*1), Z24, Z8   \
	VMOVDQU64   (off+144)(p)(CX*1), Z10      \
	VPERMT2W    (off+208)(p)(CX*1), Z23, Z10 \
	VMOVDQU16   Z10, K1, Z8                  \
	VCVTPH2PS   Y8, zd                       \
	VMULPS.BCST (r*4)(R8), zd, zd

// I8D8 sets Z0-Z7 to the c·d of the eight rows in AX..R12, rows r0.. of
// their group (their coef at R8).
#define I8D8(do, r0) \
	I8D(do, AX, (r0), Z0)    \
	I8D(do, DX, (r0+1), Z1)  \
	I8D(do, R13, (r0+2), Z2) \
	I8D(do, R14, (r0+3), Z3) \
	I8D(do, R15, (r0+4), Z4) \
	I8D(do, R9, (r0+5), Z5)  \
	I8D(do, DI, (r0+6), Z6)  \
	I8D(do, R12, (r0+7), Z7)

// I8MAX sets zm to max |Z0..Z7| (zt scratch).
#define I8MAX(zm, zt) \
	VPANDD.BCST absmask<>(SB), Z0, zm \
	VPANDD.BCST absmask<>(SB), Z1, zt \
	VMAXPS      zt, zm, zm            \
	VPANDD.BCST absmask<>(SB), Z2, zt \
	VMAXPS      zt, zm, zm            \
	VPANDD.BCST absmask<>(SB), Z3, zt \
	VMAXPS      zt, zm, zm            \
	VPANDD.BCST absmask<>(SB), Z4, zt \
	VMAXPS      zt, zm, zm            \
	VPANDD.BCST absmask<>(SB), Z5, zt \
	VMAXPS      zt, zm, zm            \
	VPANDD.BCST absmask<>(SB), Z6, zt \
	VMAXPS      zt, zm, zm            \
	VPANDD.BCST absmask<>(SB), Z7, zt \
	VMAXPS      zt, zm, zm

// I8SCALEOF turns the largest |c·d| in Z12 into s (Z12) and 127/max (Z13).
#define I8SCALEOF \
	VMAXPS.BCST  tiny<>(SB), Z12, Z12 \
	VBROADCASTSS f127<>(SB), Z13      \
	VDIVPS       Z12, Z13, Z13        \
	VMULPS.BCST  inv127<>(SB), Z12, Z12

// I8SCALE: s (Z12) and 127/max|c·d| (Z13) per block.
#define I8SCALE \
	I8MAX(Z12, Z13) \
	I8SCALEOF

// I8QUANT rounds the eight rows' c·d to int32 q.
#define I8QUANT \
	VMULPS    Z13, Z0, Z0 \
	VMULPS    Z13, Z1, Z1 \
	VMULPS    Z13, Z2, Z2 \
	VMULPS    Z13, Z3, Z3 \
	VMULPS    Z13, Z4, Z4 \
	VMULPS    Z13, Z5, Z5 \
	VMULPS    Z13, Z6, Z6 \
	VMULPS    Z13, Z7, Z7 \
	VCVTPS2DQ Z0, Z0      \
	VCVTPS2DQ Z1, Z1      \
	VCVTPS2DQ Z2, Z2      \
	VCVTPS2DQ Z3, Z3      \
	VCVTPS2DQ Z4, Z4      \
	VCVTPS2DQ Z5, Z5      \
	VCVTPS2DQ Z6, Z6      \
	VCVTPS2DQ Z7, Z7

// I8CORR: -8·Σq (Z14).
#define I8CORR \
	VPADDD Z1, Z0, Z14   \
	VPADDD Z3, Z2, Z15   \
	VPADDD Z5, Z4, Z16   \
	VPADDD Z7, Z6, Z11   \
	VPADDD Z15, Z14, Z14 \
	VPADDD Z11, Z16, Z16 \
	VPADDD Z16, Z14, Z14 \
	VPSLLD $3, Z14, Z14  \
	VPXORD Z15, Z15, Z15 \
	VPSUBD Z14, Z15, Z14

// I8PACK1: q as bytes, rows 0-3 in the lanes of Z0, rows 4-7 in Z4.
#define I8PACK1 \
	VPMOVDB      Z0, X0          \
	VPMOVDB      Z1, X1          \
	VPMOVDB      Z2, X2          \
	VPMOVDB      Z3, X3          \
	VPMOVDB      Z4, X4          \
	VPMOVDB      Z5, X5          \
	VPMOVDB      Z6, X6          \
	VPMOVDB      Z7, X7          \
	VINSERTI32X4 $1, X1, Z0, Z0  \
	VINSERTI32X4 $2, X2, Z0, Z0  \
	VINSERTI32X4 $3, X3, Z0, Z0  \
	VINSERTI32X4 $1, X5, Z4, Z4  \
	VINSERTI32X4 $2, X6, Z4, Z4  \
	VINSERTI32X4 $3, X7, Z4, Z4

// I8PACK2 interleaves them with s and -8·Σq into the blocks' 16-byte
// records (Z5, Z0, Z6, Z1: four blocks each).
#define I8PACK2 \
	VMOVDQA64 Z0, Z1          \
	VPERMT2B  Z4, Z22, Z0     \
	VPERMT2B  Z4, Z21, Z1     \
	VMOVDQA64 Z12, Z2         \
	VPERMT2D  Z14, Z20, Z2    \
	VMOVDQA64 Z12, Z3         \
	VPERMT2D  Z14, Z19, Z3    \
	VMOVDQA64 Z0, Z5          \
	VPERMT2Q  Z2, Z18, Z5     \
	VPERMT2Q  Z2, Z17, Z0     \
	VMOVDQA64 Z1, Z6          \
	VPERMT2Q  Z3, Z18, Z6     \
	VPERMT2Q  Z3, Z17, Z1

#define I8STORE(roff) \
	VMOVDQU64 Z5, roff(BX)       \
	VMOVDQU64 Z0, (roff+64)(BX)  \
	VMOVDQU64 Z6, (roff+128)(BX) \
	VMOVDQU64 Z1, (roff+192)(BX)

// SIXTEEN runs blk over the sixteen blocks at CX, with pf's five
// prefetches of the rows ahead spread over them.
#define SIXTEEN(blk, pf) \
	blk(0)   \
	pf(0)    \
	blk(1)   \
	blk(2)   \
	blk(3)   \
	pf(64)   \
	blk(4)   \
	blk(5)   \
	blk(6)   \
	pf(128)  \
	blk(7)   \
	blk(8)   \
	blk(9)   \
	pf(192)  \
	blk(10)  \
	blk(11)  \
	blk(12)  \
	pf(256)  \
	blk(13)  \
	blk(14)  \
	blk(15)

// I8CONSTS loads what the int8 axpys' records and sums share: the byte
// interleave (Z30), the nibble mask (Z31), the scale pickers (Z23, Z24)
// and K1.
#define I8CONSTS \
	VMOVDQU64    i8perm<>(SB), Z30 \
	VPBROADCASTD nib4<>(SB), Z31   \
	VMOVDQU64    i8dlo<>(SB), Z24  \
	VMOVDQU64    i8dhi<>(SB), Z23  \
	MOVL         $0xff00, SI       \
	KMOVW        SI, K1

// NEXTD runs blk over blocks 0-8 of the sixteen at CX with pf's first
// three prefetches, and between them sets Z0-Z7 to the next sixteen
// blocks' c·d of the rows in AX..R12 (rows r0.. of their group).
#define NEXTD(blk, pf, r0) \
	blk(0)                         \
	pf(0)                          \
	I8D(288, AX, (r0), Z0)         \
	blk(1)                         \
	I8D(288, DX, (r0+1), Z1)       \
	blk(2)                         \
	I8D(288, R13, (r0+2), Z2)      \
	blk(3)                         \
	pf(64)                         \
	I8D(288, R14, (r0+3), Z3)      \
	blk(4)                         \
	I8D(288, R15, (r0+4), Z4)      \
	blk(5)                         \
	I8D(288, R9, (r0+5), Z5)       \
	blk(6)                         \
	pf(128)                        \
	I8D(288, DI, (r0+6), Z6)       \
	blk(7)                         \
	I8D(288, R12, (r0+7), Z7)      \
	blk(8)

// func axpyQ4i8(y *float32, w *byte, stride int, rows *int32, n int, coef *float32, nblk int, rec *byte)
// Eight rows at a time, n a multiple of 8. Per block, the eight products
// coef·d are quantized to int8 with one scale s (max |coef·d| / 127), so
// that VPDPBUSD sums four rows' weights per lane in integers and y gains
// s·Σ once per eight rows: a quarter of the f32 axpy's vector work, at the
// precision of the q8_0 activations the mat-vecs use. Each block's record
// (the eight q, s, and -8·Σq; 16 bytes at rec) is made before the second
// pass sums it. The records of the first sixteen blocks (and of those past
// the last whole sixteen) are made first; those of the next sixteen are
// made between the blocks of the second pass over the current ones. Made
// all at once, the records had held up the second pass and the memory
// reads behind it: ops/avx2/NOTES.md.
TEXT ·axpyQ4i8(SB), NOSPLIT, $80-64
	I8CONSTS
	VMOVDQU64    i8qlo<>(SB), Z22
	VMOVDQU64    i8qhi<>(SB), Z21
	VMOVDQU64    i8sclo<>(SB), Z20
	VMOVDQU64    i8schi<>(SB), Z19
	VMOVDQU64    i8rlo<>(SB), Z18
	VMOVDQU64    i8rhi<>(SB), Z17
	XORQ         R12, R12

i8loop:
	ROWS8(i8done)
	MOVQ coef+40(FP), R8
	MOVQ 64(SP), BX
	LEAQ (R8)(BX*4), R8
	MOVQ rec+56(FP), BX
	XORQ CX, CX
	MOVQ nblk+48(FP), R11
	CMPQ R11, $16
	JLT  i8tail
	I8D8(0, 0)
	I8SCALE
	I8QUANT
	I8CORR
	I8PACK1
	I8PACK2
	I8STORE(0)

	// The records past the last whole sixteen blocks, one at a time.
i8tail:
	MOVQ    R11, CX
	ANDQ    $-16, CX
	MOVQ    CX, SI
	SHLQ    $4, SI
	ADDQ    SI, BX
	IMULQ   $18, CX
	ANDQ    $15, R11
	VMOVUPS (R8), Y9

i8rec:
	TESTQ   R11, R11
	JZ      i8sum
	MOVWLZX (AX)(CX*1), SI
	VMOVD   SI, X0
	VPINSRW $1, (DX)(CX*1), X0, X0
	VPINSRW $2, (R13)(CX*1), X0, X0
	VPINSRW $3, (R14)(CX*1), X0, X0
	VPINSRW $4, (R15)(CX*1), X0, X0
	VPINSRW $5, (R9)(CX*1), X0, X0
	VPINSRW $6, (DI)(CX*1), X0, X0
	VPINSRW $7, (R12)(CX*1), X0, X0
	VCVTPH2PS    X0, Y0
	VMULPS       Y9, Y0, Y0
	VPANDD.BCST  absmask<>(SB), Y0, Y1
	VEXTRACTF128 $1, Y1, X2
	VMAXPS       X2, X1, X1
	VPERMILPS    $0x4e, X1, X2
	VMAXPS       X2, X1, X1
	VPERMILPS    $0xb1, X1, X2
	VMAXPS       X2, X1, X1
	VMAXPS.BCST  tiny<>(SB), X1, X1
	VBROADCASTSS f127<>(SB), X2
	VDIVPS       X1, X2, X2
	VMULPS.BCST  inv127<>(SB), X1, X1
	VMOVSS       X1, 8(BX)
	VBROADCASTSS X2, Y2
	VMULPS       Y2, Y0, Y0
	VCVTPS2DQ    Y0, Y0
	VPMOVDB      Y0, X5
	VMOVQ        X5, (BX)
	VEXTRACTI128 $1, Y0, X3
	VPADDD       X0, X3, X3
	VPSHUFD      $0x4e, X3, X4
	VPADDD       X4, X3, X3
	VPSHUFD      $0xb1, X3, X4
	VPADDD       X4, X3, X3
	VPSLLD       $3, X3, X3
	VPXORD       X4, X4, X4
	VPSUBD       X3, X4, X3
	VMOVD        X3, 12(BX)
	ADDQ         $18, CX
	ADDQ         $16, BX
	DECQ         R11
	JMP          i8rec

	// Second pass: y += s·Σ q·(nibble-8), sixteen blocks at a time, the
	// next sixteen's records made in between while there is a whole next.
i8sum:
	MOVQ y+0(FP), R10
	MOVQ rec+56(FP), BX
	MOVQ nblk+48(FP), R11
	XORQ CX, CX

i8pipe:
	CMPQ R11, $32
	JLT  i8last
	NEXTD(I8BLK, PF8, 0)
	I8SCALE
	I8BLK(9)
	PF8(192)
	I8QUANT
	I8BLK(10)
	I8CORR
	I8BLK(11)
	I8PACK1
	I8BLK(12)
	PF8(256)
	I8PACK2
	I8BLK(13)
	I8STORE(256)
	I8BLK(14)
	I8BLK(15)
	ADDQ $288, CX
	ADDQ $256, BX
	ADDQ $2048, R10
	SUBQ $16, R11
	JMP  i8pipe

i8last:
	CMPQ R11, $16
	JLT  i8one
	SIXTEEN(I8BLK, PF8)
	ADDQ $288, CX
	ADDQ $256, BX
	ADDQ $2048, R10
	SUBQ $16, R11

i8one:
	TESTQ R11, R11
	JZ    i8next
	I8BLK(0)
	ADDQ  $18, CX
	ADDQ  $16, BX
	ADDQ  $128, R10
	DECQ  R11
	JMP   i8one

i8next:
	MOVQ 64(SP), R12
	ADDQ $8, R12
	JMP  i8loop

i8done:
	VZEROUPPER
	RET

// The sixteen-row int8 axpy (axpyQ4i16): one scale per sixteen rows and
// block, so that y gains s·Σ once per sixteen rows and a record serves
// sixteen. Per sixteen blocks: rows 0-7 (their int32 sums to the scratch),
// then rows 8-15 (from those sums to y), the next sixteen's records made in
// between (rows 0-7's c·d kept in the scratch until rows 8-15's give the
// scale over all sixteen). Eight row addresses fit in registers; the
// sixteen are at 136-256(SP), the rows sixteen to thirty-one ahead at 0-56
// and 72-128. BX moves 448 bytes per sixteen blocks through the record
// area: the q of rows 4k..4k+3 for block i (four bytes, one per row) at
// 64k+4i, s at 256+4i, -8·Σq at 320+4i and 17 times that at 384+4i; below
// BX, the int32 sums at -2560 and the c·d at -512.

// I16PF prefetches the two lines from off+CX of each of the eight rows
// whose addresses are at s..s+56(SP): five of them cover a row's sixteen
// blocks about twice over. Against PF8's three lines, two threads over all
// rows read 1% faster in the host's slow state and 4% in its fast one,
// where the axpy is bound by its instructions; with one line, 4% slower in
// the slow state (ops/avx2/NOTES.md).
#define PFL2(slot, off) \
	MOVQ       slot(SP), SI           \
	PREFETCHT1 off(SI)(CX*1)          \
	PREFETCHT1 (off+64)(SI)(CX*1)

#define I16PF(s, off) EACH8(PFL2, s, off)

#define PF8A(off) I16PF(0, off)

#define PF8B(off) I16PF(72, off)

// LOAD8(s) loads the eight row addresses at s..s+56(SP).
#define LOAD8(s) \
	MOVQ (s)(SP), AX     \
	MOVQ (s+8)(SP), DX   \
	MOVQ (s+16)(SP), R13 \
	MOVQ (s+24)(SP), R14 \
	MOVQ (s+32)(SP), R15 \
	MOVQ (s+40)(SP), R9  \
	MOVQ (s+48)(SP), DI  \
	MOVQ (s+56)(SP), R12

// I16PACK4 leaves four rows' q (int32 in za..zd, a lane per block) in za
// as a dword per block, one byte per row: the saturating packs keep each
// 128-bit lane's blocks in place (a byte per row and block), and one
// in-lane shuffle transposes those 4x4 bytes. No shuffle crosses lanes.
#define I16PACK4(za, zb, zc, zd) \
	VPACKSSDW zb, za, za          \
	VPACKSSDW zd, zc, zc          \
	VPACKSSWB zc, za, za          \
	VPSHUFB   i16tr<>(SB), za, za

// I16PACK packs Z0-Z7 into Z0 (rows 0-3 of the eight) and Z4 (rows 4-7),
// and adds 8·Σq per block to Z14 (Z21: bytes of 8).
#define I16PACK \
	I16PACK4(Z0, Z1, Z2, Z3) \
	I16PACK4(Z4, Z5, Z6, Z7) \
	VPDPBUSD Z0, Z21, Z14    \
	VPDPBUSD Z4, Z21, Z14

// I16MAX sets zm to max(|zs|, |Z0..Z7|): VRANGEPS picks the larger
// magnitude and clears its sign (imm 0b1011).
#define I16MAX(zs, zm) \
	VRANGEPS $11, Z0, zs, zm \
	VRANGEPS $11, Z1, zm, zm \
	VRANGEPS $11, Z2, zm, zm \
	VRANGEPS $11, Z3, zm, zm \
	VRANGEPS $11, Z4, zm, zm \
	VRANGEPS $11, Z5, zm, zm \
	VRANGEPS $11, Z6, zm, zm \
	VRANGEPS $11, Z7, zm, zm

// I16ROWS is I8ROWS with the high nibbles taken from the whole bytes:
// Z26 gains Σ q·byte = Σ q·lo + 16·Σ q·hi and Z25 Σ q·lo, so that
// (Z26 - Z25)/16 is the high nibbles' sum, taken once per sixteen rows
// (I16B): two vector ops fewer per four rows. Z26 starts at 17·(-8·Σq),
// Z25 at -8·Σq, which leaves each half its -8.
#define I16ROWS(i, p0, p1, p2, p3, q) \
	I8BYTES(i, p0, p1, p2, p3)                     \
	VPDPBUSD.BCST q, Z28, Z26                      \
	VPANDD        Z31, Z28, Z28                    \
	VPDPBUSD.BCST q, Z28, Z25

// I16A: rows 0-7 (AX..R12) of block i: -8·Σq plus their products, to the
// int32 sums at -2560+128i(BX).
#define I16A(i) \
	VPBROADCASTD (320+4*i)(BX), Z25                   \
	VPBROADCASTD (384+4*i)(BX), Z26                   \
	I16ROWS(i, AX, DX, R13, R14, (4*i)(BX))           \
	I16ROWS(i, R15, R9, DI, R12, (64+4*i)(BX))        \
	VMOVDQU64    Z25, (-2560+128*i)(BX)               \
	VMOVDQU64    Z26, (-2496+128*i)(BX)

// I16B: rows 8-15 of block i from those sums; y (R10) += s·Σ.
#define I16B(i) \
	VMOVDQU64    (-2560+128*i)(BX), Z25               \
	VMOVDQU64    (-2496+128*i)(BX), Z26               \
	I16ROWS(i, AX, DX, R13, R14, (128+4*i)(BX))       \
	I16ROWS(i, R15, R9, DI, R12, (192+4*i)(BX))       \
	VPSUBD       Z25, Z26, Z26                        \
	VPSRAD       $4, Z26, Z26                         \
	VCVTDQ2PS    Z25, Z25                             \
	VCVTDQ2PS    Z26, Z26                             \
	VBROADCASTSS (256+4*i)(BX), Z27                   \
	VFMADD213PS  (128*i)(R10), Z27, Z25               \
	VFMADD213PS  (128*i+64)(R10), Z27, Z26            \
	VMOVUPS      Z25, (128*i)(R10)                    \
	VMOVUPS      Z26, (128*i+64)(R10)

// I16SAVE keeps rows 0-7's c·d (Z0-Z7) in the scratch at -512(BX);
// I16LOAD brings them back.
#define I16SAVE \
	VMOVDQU64 Z0, -512(BX) \
	VMOVDQU64 Z1, -448(BX) \
	VMOVDQU64 Z2, -384(BX) \
	VMOVDQU64 Z3, -320(BX) \
	VMOVDQU64 Z4, -256(BX) \
	VMOVDQU64 Z5, -192(BX) \
	VMOVDQU64 Z6, -128(BX) \
	VMOVDQU64 Z7, -64(BX)

#define I16LOAD \
	VMOVDQU64 -512(BX), Z0 \
	VMOVDQU64 -448(BX), Z1 \
	VMOVDQU64 -384(BX), Z2 \
	VMOVDQU64 -320(BX), Z3 \
	VMOVDQU64 -256(BX), Z4 \
	VMOVDQU64 -192(BX), Z5 \
	VMOVDQU64 -128(BX), Z6 \
	VMOVDQU64 -64(BX), Z7

// I16REC0-5 make the records from rows 8-15's c·d (Z0-Z7), rows 0-7's
// largest |c·d| (Z16) and their c·d in the scratch, in steps that the
// sums can take between their blocks, storing them ro past BX.
#define I16REC0 \
	I16MAX(Z16, Z12) \
	I8SCALEOF

#define I16REC1 \
	I8QUANT \
	VPXORD Z14, Z14, Z14

#define I16REC2(ro) \
	I16PACK                     \
	VMOVDQU64 Z0, (ro+128)(BX)  \
	VMOVDQU64 Z4, (ro+192)(BX)  \
	I16LOAD

#define I16REC3 \
	I8QUANT

#define I16REC4 \
	I16PACK                \
	VPXORD Z15, Z15, Z15   \
	VPSUBD Z14, Z15, Z14   \
	VPSLLD $4, Z14, Z15    \
	VPADDD Z14, Z15, Z15

#define I16REC5(ro) \
	VMOVDQU64 Z0, (ro)(BX)      \
	VMOVDQU64 Z4, (ro+64)(BX)   \
	VMOVUPS   Z12, (ro+256)(BX) \
	VMOVDQU64 Z14, (ro+320)(BX) \
	VMOVDQU64 Z15, (ro+384)(BX)

// func axpyQ4i16(y *float32, w *byte, stride int, rows *int32, n int, coef *float32, nblk int, rec *byte)
// n a multiple of 16, nblk of 16; rec holds 2560+448·(nblk/16+1) bytes.
TEXT ·axpyQ4i16(SB), NOSPLIT, $264-64
	I8CONSTS
	VPBROADCASTD eight8<>(SB), Z21
	MOVQ         $0, 64(SP)

i16group:
	MOVQ 64(SP), R12
	MOVQ n+32(FP), R9
	LEAQ 16(R12), BX
	CMPQ BX, R9
	JGT  i16done
	MOVQ rows+24(FP), R8
	MOVQ w+8(FP), SI
	MOVQ stride+16(FP), BX
	DECQ R9
	ROWPTR(0, R12, AX)
	MOVQ AX, 136(SP)
	ROWPTR(1, R12, AX)
	MOVQ AX, 144(SP)
	ROWPTR(2, R12, AX)
	MOVQ AX, 152(SP)
	ROWPTR(3, R12, AX)
	MOVQ AX, 160(SP)
	ROWPTR(4, R12, AX)
	MOVQ AX, 168(SP)
	ROWPTR(5, R12, AX)
	MOVQ AX, 176(SP)
	ROWPTR(6, R12, AX)
	MOVQ AX, 184(SP)
	ROWPTR(7, R12, AX)
	MOVQ AX, 192(SP)
	ROWPTR(8, R12, AX)
	MOVQ AX, 200(SP)
	ROWPTR(9, R12, AX)
	MOVQ AX, 208(SP)
	ROWPTR(10, R12, AX)
	MOVQ AX, 216(SP)
	ROWPTR(11, R12, AX)
	MOVQ AX, 224(SP)
	ROWPTR(12, R12, AX)
	MOVQ AX, 232(SP)
	ROWPTR(13, R12, AX)
	MOVQ AX, 240(SP)
	ROWPTR(14, R12, AX)
	MOVQ AX, 248(SP)
	ROWPTR(15, R12, AX)
	MOVQ AX, 256(SP)
	PFPTR(16, 0)
	PFPTR(17, 8)
	PFPTR(18, 16)
	PFPTR(19, 24)
	PFPTR(20, 32)
	PFPTR(21, 40)
	PFPTR(22, 48)
	PFPTR(23, 56)
	PFPTR(24, 72)
	PFPTR(25, 80)
	PFPTR(26, 88)
	PFPTR(27, 96)
	PFPTR(28, 104)
	PFPTR(29, 112)
	PFPTR(30, 120)
	PFPTR(31, 128)
	MOVQ coef+40(FP), R8
	LEAQ (R8)(R12*4), R8
	MOVQ y+0(FP), R10
	XORQ CX, CX
	MOVQ nblk+48(FP), R11
	SHRQ $4, R11

	// The records of the first sixteen blocks.
	MOVQ rec+56(FP), BX
	ADDQ $2560, BX
	LOAD8(136)
	I8D8(0, 0)
	I16MAX(Z0, Z16)
	I16SAVE
	LOAD8(200)
	I8D8(0, 8)
	I16REC0
	I16REC1
	I16REC2(0)
	I16REC3
	I16REC4
	I16REC5(0)

i16chunk:
	CMPQ R11, $1
	JEQ  i16last

	// Rows 0-7 of these sixteen blocks, prefetching rows 16-23 ahead, and
	// the next sixteen's c·d of rows 0-7 in between.
	LOAD8(136)
	NEXTD(I16A, PF8A, 0)
	I16MAX(Z0, Z16)
	I16A(9)
	PF8A(192)
	I16SAVE
	I16A(10)
	I16A(11)
	I16A(12)
	PF8A(256)
	I16A(13)
	I16A(14)
	I16A(15)

	// Rows 8-15, prefetching rows 24-31 ahead, and the next sixteen's
	// records in between.
	LOAD8(200)
	NEXTD(I16B, PF8B, 8)
	I16REC0
	I16B(9)
	PF8B(192)
	I16REC1
	I16B(10)
	I16REC2(448)
	I16B(11)
	I16REC3
	I16B(12)
	PF8B(256)
	I16REC4
	I16B(13)
	I16REC5(448)
	I16B(14)
	I16B(15)

	ADDQ $288, CX
	ADDQ $2048, R10
	ADDQ $448, BX
	DECQ R11
	JMP  i16chunk

	// The last sixteen blocks: no records to make.
i16last:
	LOAD8(136)
	SIXTEEN(I16A, PF8A)
	LOAD8(200)
	SIXTEEN(I16B, PF8B)

	MOVQ 64(SP), R12
	ADDQ $16, R12
	MOVQ R12, 64(SP)
	JMP  i16group

i16done:
	VZEROUPPER
	RET
