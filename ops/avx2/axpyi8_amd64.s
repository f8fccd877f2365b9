//go:build amd64 && !purego

// The q4_0 axpy with int8 coefficients on AVX2 (no AVX-512): sixteen rows
// at a time, each block's sixteen products coef·d rounded to int8 with one
// scale, as axpyQ4i16 does on AVX-512 (axpyi8_test.go models both). The
// float kernel (axpyQ4_0) spends ~24 operations per row and block, ten of
// them its scales; here VPMADDUBSW sums two rows' 32 values in two
// operations, and the scales cost two loads per row and block.

#include "textflag.h"
#include "hmax_amd64.h"

DATA i8a_abs<>+0(SB)/4, $0x7fffffff
GLOBL i8a_abs<>(SB), RODATA|NOPTR, $4
DATA i8a_tiny<>+0(SB)/4, $0x0da24260 // float32(1e-30)
GLOBL i8a_tiny<>(SB), RODATA|NOPTR, $4
DATA i8a_127<>+0(SB)/4, $0x42fe0000
GLOBL i8a_127<>(SB), RODATA|NOPTR, $4
DATA i8a_inv127<>+0(SB)/4, $0x3c010204 // float32(1.0/127)
GLOBL i8a_inv127<>(SB), RODATA|NOPTR, $4
DATA i8a_low4<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL i8a_low4<>(SB), RODATA|NOPTR, $8

// PAIR adds two rows' block at DX (row pointers at 8·ra and 8·rb of R8)
// times their int8 coefficients (the word at rec+off of SI) to the int16
// sums Y0 (values 0-15) and Y1 (16-31). Y15: low-nibble mask.
#define PAIR(ra, rb, off) \
	MOVQ        (8*ra)(R8), AX          \
	MOVQ        (8*rb)(R8), CX          \
	VMOVDQU     2(AX)(DX*1), X2         \
	VMOVDQU     2(CX)(DX*1), X3         \
	VPUNPCKHBW  X3, X2, X4              \
	VPUNPCKLBW  X3, X2, X2              \
	VINSERTI128 $1, X4, Y2, Y2          \
	VPSRLW      $4, Y2, Y3              \
	VPAND       Y15, Y2, Y2             \
	VPAND       Y15, Y3, Y3             \
	VPBROADCASTW off(SI), Y4            \
	VPMADDUBSW  Y4, Y2, Y2              \
	VPMADDUBSW  Y4, Y3, Y3              \
	VPADDW      Y2, Y0, Y0              \
	VPADDW      Y3, Y1, Y1

// NEXTROWS prefetches three lines of the next group's rows (pointers at
// 128(R8)) for step R13 of the records and the sums: row R13%16 from
// byte 192·(R13/16), so that a group's 2·128 steps reach 3072 bytes into
// each row; the memory then works through all of the group's phases.
#define NEXTROWS \
	MOVQ       R13, AX              \
	ANDQ       $15, AX              \
	MOVQ       128(R8)(AX*8), CX    \
	MOVQ       R13, AX              \
	SHRQ       $4, AX               \
	IMUL3Q     $192, AX, AX         \
	PREFETCHT0 (CX)(AX*1)           \
	PREFETCHT0 64(CX)(AX*1)         \
	PREFETCHT0 128(CX)(AX*1)        \
	INCQ       R13

// func axpyQ4i16a(y *float32, w *byte, stride int, rows *int32, n int, coef *float32, nblk int, rec *byte)
// n is a multiple of 16. rec holds 256 + 64·nblk bytes: the sixteen row
// pointers and the next group's, then each block's sixteen d (f16, row
// order), then each block's record: sixteen int8 coefficients in the order rows 0-3, 8-11,
// 4-7, 12-15 (VPACKSS's), the scale s (f32) at 16 and -8·Σq (int16) at 20.
TEXT ·axpyQ4i16a(SB), NOSPLIT, $0-64
	MOVQ rec+56(FP), R8
	MOVQ nblk+48(FP), R9
	XORQ R10, R10 // first row of the group

group:
	CMPQ R10, n+32(FP)
	JGE  done

	// The sixteen row pointers, and at 128 those of the next sixteen (this
	// group's again after the last), which the sums prefetch.
	MOVQ rows+24(FP), SI
	MOVQ stride+16(FP), BX
	MOVQ w+8(FP), DI
	LEAQ 16(R10), R11
	LEAQ 32(R10), AX
	CMPQ AX, n+32(FP)
	CMOVQGT R10, R11
	XORQ CX, CX

ptrs:
	LEAQ    (R10)(CX*1), AX
	MOVLQSX (SI)(AX*4), AX
	IMULQ   BX, AX
	ADDQ    DI, AX
	MOVQ    AX, (R8)(CX*8)
	LEAQ    (R11)(CX*1), AX
	MOVLQSX (SI)(AX*4), AX
	IMULQ   BX, AX
	ADDQ    DI, AX
	MOVQ    AX, 128(R8)(CX*8)
	INCQ    CX
	CMPQ    CX, $16
	JLT     ptrs

	// Each row's d, row by row into the table of sixteen per block (four
	// blocks a step, then the rest).
	LEAQ 256(R8), R11 // the d table
	XORQ CX, CX

drow:
	MOVQ (R8)(CX*8), SI
	LEAQ (R11)(CX*2), DI
	XORQ DX, DX
	MOVQ R9, BX
	CMPQ BX, $4
	JLT  d1

d4:
	MOVWLZX (SI)(DX*1), AX
	MOVW    AX, (DI)
	MOVWLZX 18(SI)(DX*1), AX
	MOVW    AX, 32(DI)
	MOVWLZX 36(SI)(DX*1), AX
	MOVW    AX, 64(DI)
	MOVWLZX 54(SI)(DX*1), AX
	MOVW    AX, 96(DI)
	ADDQ    $72, DX
	ADDQ    $128, DI
	SUBQ    $4, BX
	CMPQ    BX, $4
	JGE     d4

d1:
	TESTQ   BX, BX
	JZ      dnext
	MOVWLZX (SI)(DX*1), AX
	MOVW    AX, (DI)
	ADDQ    $18, DX
	ADDQ    $32, DI
	DECQ    BX
	JMP     d1

dnext:
	INCQ CX
	CMPQ CX, $16
	JLT  drow

	// The records.
	MOVQ         coef+40(FP), AX
	VMOVUPS      (AX)(R10*4), Y14
	VMOVUPS      32(AX)(R10*4), Y15
	VBROADCASTSS i8a_abs<>(SB), Y13
	MOVQ         R9, BX
	SHLQ         $5, BX
	LEAQ         (R11)(BX*1), R12 // records
	MOVQ         R11, DI
	MOVQ         R12, SI
	MOVQ         R9, BX
	XORQ         R13, R13

recs:
	NEXTROWS
	VCVTPH2PS    (DI), Y0
	VCVTPH2PS    16(DI), Y1
	VMULPS       Y14, Y0, Y0
	VMULPS       Y15, Y1, Y1
	VANDPS       Y13, Y0, Y2
	VANDPS       Y13, Y1, Y3
	VMAXPS       Y3, Y2, Y2
	HMAX8(Y2, X2, X3)
	VMAXSS       i8a_tiny<>(SB), X2, X2
	VMULSS       i8a_inv127<>(SB), X2, X4
	VMOVSS       X4, 16(SI)
	VMOVSS       i8a_127<>(SB), X5
	VDIVSS       X2, X5, X5
	VBROADCASTSS X5, Y5
	VMULPS       Y5, Y0, Y0
	VMULPS       Y5, Y1, Y1
	VCVTPS2DQ    Y0, Y0
	VCVTPS2DQ    Y1, Y1
	VPADDD       Y1, Y0, Y2
	VEXTRACTI128 $1, Y2, X3
	VPADDD       X3, X2, X2
	VPSHUFD      $0x4e, X2, X3
	VPADDD       X3, X2, X2
	VPSHUFD      $0xb1, X2, X3
	VPADDD       X3, X2, X2
	VMOVD        X2, AX
	IMUL3L       $-8, AX, AX
	MOVW         AX, 20(SI)
	VPACKSSDW    Y1, Y0, Y0
	VEXTRACTI128 $1, Y0, X1
	VPACKSSWB    X1, X0, X0
	VMOVDQU      X0, (SI)
	ADDQ         $32, DI
	ADDQ         $32, SI
	DECQ         BX
	JNZ          recs

	// The sums, block by block: sixteen rows in int16, then s·Σ into y.
	VPBROADCASTB i8a_low4<>(SB), Y15
	MOVQ         R12, SI
	MOVQ         y+0(FP), DI
	XORQ         DX, DX
	MOVQ         R9, BX

sums:
	NEXTROWS
	VPBROADCASTW 20(SI), Y0
	VMOVDQA      Y0, Y1
	PAIR(0, 1, 0)
	PAIR(2, 3, 2)
	PAIR(8, 9, 4)
	PAIR(10, 11, 6)
	PAIR(4, 5, 8)
	PAIR(6, 7, 10)
	PAIR(12, 13, 12)
	PAIR(14, 15, 14)
	VPMOVSXWD    X0, Y2
	VEXTRACTI128 $1, Y0, X3
	VPMOVSXWD    X3, Y3
	VPMOVSXWD    X1, Y4
	VEXTRACTI128 $1, Y1, X5
	VPMOVSXWD    X5, Y5
	VCVTDQ2PS    Y2, Y2
	VCVTDQ2PS    Y3, Y3
	VCVTDQ2PS    Y4, Y4
	VCVTDQ2PS    Y5, Y5
	VBROADCASTSS 16(SI), Y6
	VMOVUPS      (DI), Y7
	VMOVUPS      32(DI), Y8
	VMOVUPS      64(DI), Y9
	VMOVUPS      96(DI), Y10
	VFMADD231PS  Y6, Y2, Y7
	VFMADD231PS  Y6, Y3, Y8
	VFMADD231PS  Y6, Y4, Y9
	VFMADD231PS  Y6, Y5, Y10
	VMOVUPS      Y7, (DI)
	VMOVUPS      Y8, 32(DI)
	VMOVUPS      Y9, 64(DI)
	VMOVUPS      Y10, 96(DI)
	ADDQ         $18, DX
	ADDQ         $32, SI
	ADDQ         $128, DI
	DECQ         BX
	JNZ          sums

	ADDQ $16, R10
	JMP  group

done:
	VZEROUPPER
	RET
