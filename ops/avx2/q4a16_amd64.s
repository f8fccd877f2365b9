//go:build amd64 && !purego

// The q4_0 axpy over every row, repacked (q4a16.go): per block of 32
// columns, a register of y for each eight of them (Y11-Y14) takes every
// group of sixteen rows in turn.

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
DATA a16_eights<>+0(SB)/4, $0x08080808
DATA a16_eights<>+4(SB)/4, $0x08080808
DATA a16_eights<>+8(SB)/4, $0x08080808
DATA a16_eights<>+12(SB)/4, $0x08080808
DATA a16_eights<>+16(SB)/4, $0x08080808
DATA a16_eights<>+20(SB)/4, $0x08080808
DATA a16_eights<>+24(SB)/4, $0x08080808
DATA a16_eights<>+28(SB)/4, $0x08080808
GLOBL a16_eights<>(SB), RODATA|NOPTR, $32
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

DATA a16_perm<>+0(SB)/4, $0
DATA a16_perm<>+4(SB)/4, $4
DATA a16_perm<>+8(SB)/4, $1
DATA a16_perm<>+12(SB)/4, $5
DATA a16_perm<>+16(SB)/4, $2
DATA a16_perm<>+20(SB)/4, $6
DATA a16_perm<>+24(SB)/4, $3
DATA a16_perm<>+28(SB)/4, $7
GLOBL a16_perm<>(SB), RODATA|NOPTR, $32

// Each group's coef·d are rounded to int8 (Y2 the scale in every lane;
// Y4, Y5, Y0, Y1 the int8 values of rows 0-3, 4-7, 8-11, 12-15, each in
// every four bytes; Y6 8Σk in every lane) before its four parts are added
// up. Making the sixteen groups' values of a chunk in a pass of their own
// (no chain from group to group) read 15-18 GB/s in L2 against 12, but
// 9.0-9.8 from memory against 10.7-11.7 (BenchmarkAxpyQ4x16, alternating).

// HALF sums, into T (int16, four a column), the 32 bytes at SI+off:
// their low nibbles times L and high times H; U is scratch.
#define HALF(off, L, H, T, U) \
	VMOVDQU    off(SI), T           \
	VPSRLW     $4, T, U             \
	VPAND      Y15, T, T            \
	VPAND      Y15, U, U            \
	VPMADDUBSW L, T, T              \
	VPMADDUBSW H, U, U              \
	VPADDW     U, T, T

// PART adds part o's eight columns to ACC: rows 0-7 (int8 values of rows
// 0-3 in Y4, 4-7 in Y5) and 8-15 (Y0, Y1), less 8Σk (Y6), by the scale
// (Y2).
#define PART(o, ACC) \
	HALF(32+64*o, Y4, Y5, Y7, Y8)    \
	HALF(64+64*o, Y0, Y1, Y9, Y10)   \
	VPADDW      Y9, Y7, Y7           \
	VPMADDWD    a16_ones<>(SB), Y7, Y7 \
	VPSUBD      Y6, Y7, Y7           \
	VCVTDQ2PS   Y7, Y7               \
	VFMADD231PS Y2, Y7, ACC

// func axpyQ4a16(y *float32, p *byte, coef *float32, ngroups int, nblk int)
TEXT ·axpyQ4a16(SB), NOSPLIT, $0-40
	MOVQ         y+0(FP), DI
	MOVQ         p+8(FP), SI
	MOVQ         nblk+32(FP), CX
	VPBROADCASTD a16_low4<>(SB), Y15

block:
	VMOVUPS (DI), Y11
	VMOVUPS 32(DI), Y12
	VMOVUPS 64(DI), Y13
	VMOVUPS 96(DI), Y14
	MOVQ    coef+16(FP), DX
	MOVQ    ngroups+24(FP), R9

group:
	PREFETCHT0   1152(SI)
	PREFETCHT0   1216(SI)
	PREFETCHT0   1280(SI)
	PREFETCHT0   1344(SI)
	PREFETCHT0   1408(SI)
	VCVTPH2PS  (SI), Y0
	VCVTPH2PS  16(SI), Y1
	VMULPS     (DX), Y0, Y0
	VMULPS     32(DX), Y1, Y1
	VANDPS     a16_abs<>(SB), Y0, Y2
	VANDPS     a16_abs<>(SB), Y1, Y3
	VMAXPS     Y3, Y2, Y2
	VPERM2F128 $1, Y2, Y2, Y3
	VMAXPS     Y3, Y2, Y2
	VPERMILPS  $0x4e, Y2, Y3
	VMAXPS     Y3, Y2, Y2
	VPERMILPS  $0xb1, Y2, Y3
	VMAXPS     Y3, Y2, Y2
	VMAXPS     a16_tiny<>(SB), Y2, Y2
	VMOVUPS    a16_c127<>(SB), Y3
	VDIVPS     Y2, Y3, Y3
	VMULPS     a16_r127<>(SB), Y2, Y2
	VMULPS     Y3, Y0, Y0
	VMULPS     Y3, Y1, Y1
	VCVTPS2DQ  Y0, Y0
	VCVTPS2DQ  Y1, Y1
	VPACKSSDW  Y1, Y0, Y0
	VPACKSSWB  Y0, Y0, Y0
	VMOVDQU    a16_perm<>(SB), Y4
	VPERMD     Y0, Y4, Y3
	VMOVDQU    a16_eights<>(SB), Y1
	VPMADDUBSW Y3, Y1, Y6
	VPMADDWD   a16_ones<>(SB), Y6, Y6
	VPHADDD    Y6, Y6, Y6
	VPHADDD    Y6, Y6, Y6
	VPSHUFD    $0x00, Y3, Y4
	VPSHUFD    $0x55, Y3, Y5
	VPSHUFD    $0xaa, Y3, Y0
	VPSHUFD    $0xff, Y3, Y1
	PART(0, Y11)
	PART(1, Y12)
	PART(2, Y13)
	PART(3, Y14)
	ADDQ $288, SI
	ADDQ $64, DX
	DECQ R9
	JNZ  group

	VMOVUPS Y11, (DI)
	VMOVUPS Y12, 32(DI)
	VMOVUPS Y13, 64(DI)
	VMOVUPS Y14, 96(DI)
	ADDQ    $128, DI
	DECQ    CX
	JNZ     block
	VZEROUPPER
	RET
