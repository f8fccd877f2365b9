//go:build amd64 && !purego

// The q4_0 axpy over every row, repacked (q4a16.go): records of sixteen
// rows by eight blocks, each record's int8 coefficients made for its eight
// blocks at once (lanes are blocks), then each block's 32 columns of y
// loaded, added to and stored.

#include "textflag.h"

DATA a16_low4<>+0(SB)/4, $0x0f0f0f0f
GLOBL a16_low4<>(SB), RODATA|NOPTR, $4
DATA a16_ones<>+0(SB)/4, $0x00010001
DATA a16_ones<>+4(SB)/4, $0x00010001
DATA a16_ones<>+8(SB)/4, $0x00010001
DATA a16_ones<>+12(SB)/4, $0x00010001
DATA a16_ones<>+16(SB)/4, $0x00010001
DATA a16_ones<>+20(SB)/4, $0x00010001
DATA a16_ones<>+24(SB)/4, $0x00010001
DATA a16_ones<>+28(SB)/4, $0x00010001
GLOBL a16_ones<>(SB), RODATA|NOPTR, $32
DATA a16_abs<>+0(SB)/4, $0x7fffffff
DATA a16_abs<>+4(SB)/4, $0x7fffffff
DATA a16_abs<>+8(SB)/4, $0x7fffffff
DATA a16_abs<>+12(SB)/4, $0x7fffffff
DATA a16_abs<>+16(SB)/4, $0x7fffffff
DATA a16_abs<>+20(SB)/4, $0x7fffffff
DATA a16_abs<>+24(SB)/4, $0x7fffffff
DATA a16_abs<>+28(SB)/4, $0x7fffffff
GLOBL a16_abs<>(SB), RODATA|NOPTR, $32
DATA a16_tiny<>+0(SB)/4, $0x0da24260
DATA a16_tiny<>+4(SB)/4, $0x0da24260
DATA a16_tiny<>+8(SB)/4, $0x0da24260
DATA a16_tiny<>+12(SB)/4, $0x0da24260
DATA a16_tiny<>+16(SB)/4, $0x0da24260
DATA a16_tiny<>+20(SB)/4, $0x0da24260
DATA a16_tiny<>+24(SB)/4, $0x0da24260
DATA a16_tiny<>+28(SB)/4, $0x0da24260
GLOBL a16_tiny<>(SB), RODATA|NOPTR, $32
DATA a16_c127<>+0(SB)/4, $0x42fe0000
DATA a16_c127<>+4(SB)/4, $0x42fe0000
DATA a16_c127<>+8(SB)/4, $0x42fe0000
DATA a16_c127<>+12(SB)/4, $0x42fe0000
DATA a16_c127<>+16(SB)/4, $0x42fe0000
DATA a16_c127<>+20(SB)/4, $0x42fe0000
DATA a16_c127<>+24(SB)/4, $0x42fe0000
DATA a16_c127<>+28(SB)/4, $0x42fe0000
GLOBL a16_c127<>(SB), RODATA|NOPTR, $32
DATA a16_r127<>+0(SB)/4, $0x3c010204
DATA a16_r127<>+4(SB)/4, $0x3c010204
DATA a16_r127<>+8(SB)/4, $0x3c010204
DATA a16_r127<>+12(SB)/4, $0x3c010204
DATA a16_r127<>+16(SB)/4, $0x3c010204
DATA a16_r127<>+20(SB)/4, $0x3c010204
DATA a16_r127<>+24(SB)/4, $0x3c010204
DATA a16_r127<>+28(SB)/4, $0x3c010204
GLOBL a16_r127<>(SB), RODATA|NOPTR, $32

DATA a16_shuf<>+0(SB)/8, $0x0d0905010c080400
DATA a16_shuf<>+8(SB)/8, $0x0f0b07030e0a0602
DATA a16_shuf<>+16(SB)/8, $0x0d0905010c080400
DATA a16_shuf<>+24(SB)/8, $0x0f0b07030e0a0602
GLOBL a16_shuf<>(SB), RODATA|NOPTR, $32

// The frame: C_r = d_r·coef_r of the record's rows (eight blocks a row) at
// 0-511; the coefficients made of them at 512-703 (block j's sixteen int8
// values at 512+16j, rows 0-3 in its first four bytes; its scale at
// 640+4j; its 8Σk at 672+4j); the runs' record pointers at 704+8r and
// their y at 736+8r.

// ROW1 makes row r's C_r for the eight blocks and maxes |C_r| into M.
#define ROW1(r, M) \
	VCVTPH2PS    (16*r)(SI), Y0       \
	VBROADCASTSS (4*r)(DX), Y1        \
	VMULPS       Y1, Y0, Y0           \
	VMOVUPS      Y0, (32*r)(SP)       \
	VANDPS       a16_abs<>(SB), Y0, Y0 \
	VMAXPS       Y0, M, M

// ROWS4 rounds rows r..r+3's C by Y13 (127 over the blocks' largest |C|)
// to int8, adds their values to Y14 (int32 sums by block) and leaves them
// in T, dword j of each 128-bit half holding block j's (or j+4's) rows
// r..r+3, row r in its first byte.
#define ROWS4(r, T) \
	VMULPS    (32*r)(SP), Y13, Y0    \
	VMULPS    (32*r+32)(SP), Y13, Y1 \
	VMULPS    (32*r+64)(SP), Y13, Y2 \
	VMULPS    (32*r+96)(SP), Y13, Y3 \
	VCVTPS2DQ Y0, Y0                 \
	VCVTPS2DQ Y1, Y1                 \
	VCVTPS2DQ Y2, Y2                 \
	VCVTPS2DQ Y3, Y3                 \
	VPADDD    Y0, Y14, Y14           \
	VPADDD    Y1, Y14, Y14           \
	VPADDD    Y2, Y14, Y14           \
	VPADDD    Y3, Y14, Y14           \
	VPACKSSDW Y1, Y0, Y0             \
	VPACKSSDW Y3, Y2, Y2             \
	VPACKSSWB Y2, Y0, Y0             \
	VPSHUFB   a16_shuf<>(SB), Y0, T

// COEFS makes the frame's coefficients of the record at SI (its d at
// 0-255), the group's sixteen coef at DX: the scale of block j is the
// largest |coef_r·d_rj| over 127, as gatherQ8's x is rounded.
#define COEFS \
	VXORPS      Y4, Y4, Y4             \
	VXORPS      Y5, Y5, Y5             \
	ROW1(0, Y4)                        \
	ROW1(1, Y5)                        \
	ROW1(2, Y4)                        \
	ROW1(3, Y5)                        \
	ROW1(4, Y4)                        \
	ROW1(5, Y5)                        \
	ROW1(6, Y4)                        \
	ROW1(7, Y5)                        \
	ROW1(8, Y4)                        \
	ROW1(9, Y5)                        \
	ROW1(10, Y4)                       \
	ROW1(11, Y5)                       \
	ROW1(12, Y4)                       \
	ROW1(13, Y5)                       \
	ROW1(14, Y4)                       \
	ROW1(15, Y5)                       \
	VMAXPS      Y5, Y4, Y4             \
	VMAXPS      a16_tiny<>(SB), Y4, Y4 \
	VMOVUPS     a16_c127<>(SB), Y13    \
	VDIVPS      Y4, Y13, Y13           \
	VMULPS      a16_r127<>(SB), Y4, Y4 \
	VMOVUPS     Y4, 640(SP)            \
	VPXOR       Y14, Y14, Y14          \
	ROWS4(0, Y8)                       \
	ROWS4(4, Y9)                       \
	ROWS4(8, Y10)                      \
	ROWS4(12, Y11)                     \
	VPSLLD      $3, Y14, Y14           \
	VMOVDQU     Y14, 672(SP)           \
	VPUNPCKLDQ  Y9, Y8, Y0             \
	VPUNPCKHDQ  Y9, Y8, Y1             \
	VPUNPCKLDQ  Y11, Y10, Y2           \
	VPUNPCKHDQ  Y11, Y10, Y3           \
	VPUNPCKLQDQ Y2, Y0, Y4             \
	VPUNPCKHQDQ Y2, Y0, Y5             \
	VPUNPCKLQDQ Y3, Y1, Y6             \
	VPUNPCKHQDQ Y3, Y1, Y7             \
	VMOVDQU      X4, 512(SP)           \
	VEXTRACTI128 $1, Y4, 576(SP)       \
	VMOVDQU      X5, 528(SP)           \
	VEXTRACTI128 $1, Y5, 592(SP)       \
	VMOVDQU      X6, 544(SP)           \
	VEXTRACTI128 $1, Y6, 608(SP)       \
	VMOVDQU      X7, 560(SP)           \
	VEXTRACTI128 $1, Y7, 624(SP)

// HALF sums, into T (int16, four a column), the 32 bytes at off(SI):
// their low nibbles times L and high times H; U is scratch.
#define HALF(off, L, H, T, U) \
	VMOVDQU    off(SI), T   \
	VPSRLW     $4, T, U     \
	VPAND      Y15, T, T    \
	VPAND      Y15, U, U    \
	VPMADDUBSW L, T, T      \
	VPMADDUBSW H, U, U      \
	VPADDW     U, T, T

// PART adds part o's eight columns of block j (at off(SI)) to ACC: rows
// 0-7 (values of rows 0-3 in Y4, 4-7 in Y5) and 8-15 (Y0, Y1), less 8Σk
// (Y6), by the scale (Y2).
#define PART(off, ACC) \
	HALF(off, Y4, Y5, Y7, Y8)          \
	HALF(off+32, Y0, Y1, Y9, Y10)      \
	VPADDW      Y9, Y7, Y7             \
	VPMADDWD    a16_ones<>(SB), Y7, Y7 \
	VPSUBD      Y6, Y7, Y7             \
	VCVTDQ2PS   Y7, Y7                 \
	VFMADD231PS Y2, Y7, ACC

// BLOCK adds block j of the record at SI to its 32 columns of y (at DI).
#define BLOCK(j) \
	PREFETCHT0   (2304+256+256*j)(SI)     \
	PREFETCHT0   (2304+320+256*j)(SI)     \
	PREFETCHT0   (2304+384+256*j)(SI)     \
	PREFETCHT0   (2304+448+256*j)(SI)     \
	VMOVUPS      (128*j)(DI), Y11         \
	VMOVUPS      (128*j+32)(DI), Y12      \
	VMOVUPS      (128*j+64)(DI), Y13      \
	VMOVUPS      (128*j+96)(DI), Y14      \
	VPBROADCASTD (512+16*j)(SP), Y4       \
	VPBROADCASTD (516+16*j)(SP), Y5       \
	VPBROADCASTD (520+16*j)(SP), Y0       \
	VPBROADCASTD (524+16*j)(SP), Y1       \
	VBROADCASTSS (640+4*j)(SP), Y2        \
	VPBROADCASTD (672+4*j)(SP), Y6        \
	PART(256+256*j, Y11)                  \
	PART(320+256*j, Y12)                  \
	PART(384+256*j, Y13)                  \
	PART(448+256*j, Y14)                  \
	VMOVUPS      Y11, (128*j)(DI)         \
	VMOVUPS      Y12, (128*j+32)(DI)      \
	VMOVUPS      Y13, (128*j+64)(DI)      \
	VMOVUPS      Y14, (128*j+96)(DI)

// A16RUNS sets up axpyQ4a16's runs: their record pointers at 704(SP) and
// their y at 736(SP).
#define A16RUNS \
	MOVQ         p+8(FP), SI \
	MOVQ         y+0(FP), DI \
	MOVQ         ngroups+24(FP), AX \
	IMULQ        $2304, AX \
	IMULQ        m+32(FP), AX \
	MOVQ         m+32(FP), BX \
	SHLQ         $10, BX \
	MOVQ         runs+40(FP), CX \
	XORQ         R8, R8 \
setrun: \
	MOVQ SI, 704(SP)(R8*8) \
	MOVQ DI, 736(SP)(R8*8) \
	ADDQ AX, SI \
	ADDQ BX, DI \
	INCQ R8 \
	CMPQ R8, CX \
	JLT  setrun

// A16LOOP is axpyQ4a16's walk, each record's blocks added by BLK.
#define A16LOOP(BLK) \
	MOVQ         m+32(FP), R10 \
chunk: \
	MOVQ coef+16(FP), DX \
	MOVQ ngroups+24(FP), R9 \
group: \
	XORQ R8, R8 \
run: \
	MOVQ 704(SP)(R8*8), SI \
	MOVQ 736(SP)(R8*8), DI \
	PREFETCHT0 2304(SI) \
	PREFETCHT0 2368(SI) \
	PREFETCHT0 2432(SI) \
	PREFETCHT0 2496(SI) \
	COEFS \
	BLK(0) \
	BLK(1) \
	BLK(2) \
	BLK(3) \
	BLK(4) \
	BLK(5) \
	BLK(6) \
	BLK(7) \
	ADDQ $2304, SI \
	MOVQ SI, 704(SP)(R8*8) \
	INCQ R8 \
	CMPQ R8, runs+40(FP) \
	JLT  run \
	ADDQ $64, DX \
	DECQ R9 \
	JNZ  group \
	XORQ R8, R8 \
nexty: \
	ADDQ $1024, 736(SP)(R8*8) \
	INCQ R8 \
	CMPQ R8, runs+40(FP) \
	JLT  nexty \
	DECQ R10 \
	JNZ  chunk \
	VZEROUPPER \
	RET

// func axpyQ4a16(y *float32, p *byte, coef *float32, ngroups int, m int, runs int)
//
// runs runs of m chunks each side by side (run r the chunks r·m..), a
// record of each a step, each record's lines asked for one record ahead;
// y, 256 floats a chunk, goes through L1 for every record.
TEXT ·axpyQ4a16(SB), 0, $768-48
	A16RUNS
	VPBROADCASTD a16_low4<>(SB), Y15
	A16LOOP(BLOCK)

// axpyQ4a16z is axpyQ4a16 in AVX-512 with VNNI: a part's 64 bytes are one
// zmm (lanes 0-7 rows 0-7 of its eight columns, 8-15 rows 8-15), and
// VPDPBUSD adds four rows' nibble products into int32 at once, where
// VPMADDUBSW, VPADDW and VPMADDWD took three steps; two parts' halves are
// then added across (VSHUFI64X2) into their sixteen columns. The int32
// sums are axpyQ4a16's exactly (neither overflows), so y is the same.

DATA a16_permL<>+0(SB)/8, $0
DATA a16_permL<>+8(SB)/8, $0
DATA a16_permL<>+16(SB)/8, $0
DATA a16_permL<>+24(SB)/8, $0
DATA a16_permL<>+32(SB)/8, $0x0000000200000002
DATA a16_permL<>+40(SB)/8, $0x0000000200000002
DATA a16_permL<>+48(SB)/8, $0x0000000200000002
DATA a16_permL<>+56(SB)/8, $0x0000000200000002
GLOBL a16_permL<>(SB), RODATA|NOPTR, $64
DATA a16_permH<>+0(SB)/8, $0x0000000100000001
DATA a16_permH<>+8(SB)/8, $0x0000000100000001
DATA a16_permH<>+16(SB)/8, $0x0000000100000001
DATA a16_permH<>+24(SB)/8, $0x0000000100000001
DATA a16_permH<>+32(SB)/8, $0x0000000300000003
DATA a16_permH<>+40(SB)/8, $0x0000000300000003
DATA a16_permH<>+48(SB)/8, $0x0000000300000003
DATA a16_permH<>+56(SB)/8, $0x0000000300000003
GLOBL a16_permH<>(SB), RODATA|NOPTR, $64

// ZPART sums the part at off(SI) into A (int32 by lane): its low nibbles
// times Z4 (rows 0-3 and 8-11), its high times Z5 (4-7 and 12-15); H, L
// scratch.
#define ZPART(off, A, H, L) \
	VMOVDQU64 off(SI), L \
	VPSRLW    $4, L, H   \
	VPANDD    Z15, L, L  \
	VPANDD    Z15, H, H  \
	VPXORD    A, A, A    \
	VPDPBUSD  Z4, L, A   \
	VPDPBUSD  Z5, H, A

// ZPAIR adds the parts at off and off+64 (sixteen columns) to ACC, less
// 8Σk (Z6), by the scale (Z2).
#define ZPAIR(off, ACC) \
	ZPART(off, Z16, Z18, Z19)       \
	ZPART(off+64, Z17, Z20, Z21)    \
	VSHUFI64X2  $0x44, Z17, Z16, Z18 \
	VSHUFI64X2  $0xee, Z17, Z16, Z19 \
	VPADDD      Z19, Z18, Z18        \
	VPSUBD      Z6, Z18, Z18         \
	VCVTDQ2PS   Z18, Z18             \
	VFMADD231PS Z2, Z18, ACC

// ZBLOCK is BLOCK with ZPAIR.
#define ZBLOCK(j) \
	PREFETCHT0   (2304+256+256*j)(SI) \
	PREFETCHT0   (2304+320+256*j)(SI) \
	PREFETCHT0   (2304+384+256*j)(SI) \
	PREFETCHT0   (2304+448+256*j)(SI) \
	VMOVUPS      (128*j)(DI), Z11     \
	VMOVUPS      (128*j+64)(DI), Z12  \
	VPERMD       (512+16*j)(SP), Z22, Z4 \
	VPERMD       (512+16*j)(SP), Z23, Z5 \
	VBROADCASTSS (640+4*j)(SP), Z2    \
	VPBROADCASTD (672+4*j)(SP), Z6    \
	ZPAIR(256+256*j, Z11)             \
	ZPAIR(384+256*j, Z12)             \
	VMOVUPS      Z11, (128*j)(DI)     \
	VMOVUPS      Z12, (128*j+64)(DI)

// func axpyQ4a16z(y *float32, p *byte, coef *float32, ngroups int, m int, runs int)
TEXT ·axpyQ4a16z(SB), 0, $768-48
	A16RUNS
	VPBROADCASTD a16_low4<>(SB), Z15
	VMOVDQU64    a16_permL<>(SB), Z22
	VMOVDQU64    a16_permH<>(SB), Z23
	A16LOOP(ZBLOCK)
