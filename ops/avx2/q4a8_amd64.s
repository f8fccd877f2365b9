//go:build amd64 && !purego

// The q4_0 axpy over every row, repacked (q4a8.go): per block of 32
// columns, a register of y for each eight of them (Y9-Y12) takes every
// group of eight rows in turn.

#include "textflag.h"

DATA a8_low4<>+0(SB)/4, $0x0f0f0f0f
GLOBL a8_low4<>(SB), RODATA|NOPTR, $4
DATA a8_ones<>+0(SB)/4, $0x00010001
GLOBL a8_ones<>(SB), RODATA|NOPTR, $4
DATA a8_eights<>+0(SB)/4, $0x08080808
GLOBL a8_eights<>(SB), RODATA|NOPTR, $4
DATA a8_abs<>+0(SB)/4, $0x7fffffff
DATA a8_abs<>+4(SB)/4, $0x7fffffff
DATA a8_abs<>+8(SB)/4, $0x7fffffff
DATA a8_abs<>+12(SB)/4, $0x7fffffff
DATA a8_abs<>+16(SB)/4, $0x7fffffff
DATA a8_abs<>+20(SB)/4, $0x7fffffff
DATA a8_abs<>+24(SB)/4, $0x7fffffff
DATA a8_abs<>+28(SB)/4, $0x7fffffff
GLOBL a8_abs<>(SB), RODATA|NOPTR, $32
DATA a8_tiny<>+0(SB)/4, $0x0da24260
DATA a8_tiny<>+4(SB)/4, $0x0da24260
DATA a8_tiny<>+8(SB)/4, $0x0da24260
DATA a8_tiny<>+12(SB)/4, $0x0da24260
DATA a8_tiny<>+16(SB)/4, $0x0da24260
DATA a8_tiny<>+20(SB)/4, $0x0da24260
DATA a8_tiny<>+24(SB)/4, $0x0da24260
DATA a8_tiny<>+28(SB)/4, $0x0da24260
GLOBL a8_tiny<>(SB), RODATA|NOPTR, $32
DATA a8_c127<>+0(SB)/4, $0x42fe0000
DATA a8_c127<>+4(SB)/4, $0x42fe0000
DATA a8_c127<>+8(SB)/4, $0x42fe0000
DATA a8_c127<>+12(SB)/4, $0x42fe0000
DATA a8_c127<>+16(SB)/4, $0x42fe0000
DATA a8_c127<>+20(SB)/4, $0x42fe0000
DATA a8_c127<>+24(SB)/4, $0x42fe0000
DATA a8_c127<>+28(SB)/4, $0x42fe0000
GLOBL a8_c127<>(SB), RODATA|NOPTR, $32
DATA a8_r127<>+0(SB)/4, $0x3c010204
DATA a8_r127<>+4(SB)/4, $0x3c010204
DATA a8_r127<>+8(SB)/4, $0x3c010204
DATA a8_r127<>+12(SB)/4, $0x3c010204
DATA a8_r127<>+16(SB)/4, $0x3c010204
DATA a8_r127<>+20(SB)/4, $0x3c010204
DATA a8_r127<>+24(SB)/4, $0x3c010204
DATA a8_r127<>+28(SB)/4, $0x3c010204
GLOBL a8_r127<>(SB), RODATA|NOPTR, $32

// PART adds the eight columns of part c of the group at SI to ACC: their
// nibbles (low: rows 0-3, high: rows 4-7) times the int8 coefficients of
// those rows (Y3, Y4), less 8Σk (Y5), by the scale (Y1).
#define PART(c, ACC) \
	VMOVDQU     (16+32*c)(SI), Y7 \
	VPSRLW      $4, Y7, Y8        \
	VPAND       Y13, Y7, Y7       \
	VPAND       Y13, Y8, Y8       \
	VPMADDUBSW  Y3, Y7, Y7        \
	VPMADDUBSW  Y4, Y8, Y8        \
	VPADDW      Y8, Y7, Y7        \
	VPSUBW      Y5, Y7, Y7        \
	VPMADDWD    Y14, Y7, Y7       \
	VCVTDQ2PS   Y7, Y7            \
	VFMADD231PS Y1, Y7, ACC

// func axpyQ4a8(y *float32, p *byte, coef *float32, ngroups int, nblk int)
TEXT ·axpyQ4a8(SB), NOSPLIT, $0-40
	MOVQ         y+0(FP), DI
	MOVQ         p+8(FP), SI
	MOVQ         ngroups+24(FP), R9
	MOVQ         nblk+32(FP), CX
	VPBROADCASTD a8_low4<>(SB), Y13
	VPBROADCASTD a8_ones<>(SB), Y14
	VPBROADCASTD a8_eights<>(SB), Y15

block:
	VMOVUPS (DI), Y9
	VMOVUPS 32(DI), Y10
	VMOVUPS 64(DI), Y11
	VMOVUPS 96(DI), Y12
	MOVQ    coef+16(FP), DX
	MOVQ    R9, BX

group:
	PREFETCHT0 1152(SI)
	PREFETCHT0 1216(SI)

	// The eight rows' coef·d, rounded to int8 with one scale: Y1 the
	// scale in every lane, Y3 the int8 values of rows 0-3 and Y4 of rows
	// 4-7, each repeated in every four bytes, Y5 8Σk of a column's
	// int16 halves.
	VCVTPH2PS  (SI), Y0
	VMULPS     (DX), Y0, Y0
	VANDPS     a8_abs<>(SB), Y0, Y1
	VPERM2F128 $1, Y1, Y1, Y2
	VMAXPS     Y2, Y1, Y1
	VPERMILPS  $0x4e, Y1, Y2
	VMAXPS     Y2, Y1, Y1
	VPERMILPS  $0xb1, Y1, Y2
	VMAXPS     Y2, Y1, Y1
	VMAXPS     a8_tiny<>(SB), Y1, Y1
	VMOVUPS    a8_c127<>(SB), Y2
	VDIVPS     Y1, Y2, Y2
	VMULPS     a8_r127<>(SB), Y1, Y1
	VMULPS     Y2, Y0, Y0
	VCVTPS2DQ  Y0, Y0
	VPACKSSDW  Y0, Y0, Y0
	VPACKSSWB  Y0, Y0, Y0
	VPERMQ     $0x00, Y0, Y3
	VPERMQ     $0xaa, Y0, Y4
	VPMADDUBSW Y3, Y15, Y5
	VPMADDUBSW Y4, Y15, Y6
	VPADDW     Y6, Y5, Y5

	PART(0, Y9)
	PART(1, Y10)
	PART(2, Y11)
	PART(3, Y12)
	ADDQ $144, SI
	ADDQ $32, DX
	DECQ BX
	JNZ  group

	VMOVUPS Y9, (DI)
	VMOVUPS Y10, 32(DI)
	VMOVUPS Y11, 64(DI)
	VMOVUPS Y12, 96(DI)
	ADDQ    $128, DI
	DECQ    CX
	JNZ     block
	VZEROUPPER
	RET
