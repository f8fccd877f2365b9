//go:build amd64 && !purego

// q8_0 quantization of activations on AVX2: every q4_0 mat-vec quantizes
// its x first, and Go's loop (math.Round per value) was 3-4% of a 7B
// prompt's time on an AVX2-only host.

#include "textflag.h"
#include "hmax_amd64.h"

DATA qa_abs<>+0(SB)/4, $0x7fffffff
GLOBL qa_abs<>(SB), RODATA|NOPTR, $4
DATA qa_sign<>+0(SB)/4, $0x80000000
GLOBL qa_sign<>(SB), RODATA|NOPTR, $4
DATA qa_one<>+0(SB)/4, $0x3f800000
GLOBL qa_one<>(SB), RODATA|NOPTR, $4
DATA qa_half<>+0(SB)/4, $0x3f000000
GLOBL qa_half<>(SB), RODATA|NOPTR, $4
DATA qa_127<>+0(SB)/4, $0x42fe0000
GLOBL qa_127<>(SB), RODATA|NOPTR, $4

// The dwords of the two VPACKs' result in block order (see below).
DATA qa_order<>+0(SB)/8, $0x0000000400000000
DATA qa_order<>+8(SB)/8, $0x0000000500000001
DATA qa_order<>+16(SB)/8, $0x0000000600000002
DATA qa_order<>+24(SB)/8, $0x0000000700000003
GLOBL qa_order<>(SB), RODATA|NOPTR, $32

// QROUND8 rounds y (scaled x) half away from zero, as math.Round does, into
// int32 lanes: trunc, then one step away from zero where the dropped
// fraction is at least one half. Uses Y8-Y10.
#define QROUND8(y) \
	VROUNDPS   $3, y, Y8      \
	VSUBPS     Y8, y, Y9      \
	VANDPS     Y11, Y9, Y9    \
	VCMPPS     $0x0d, Y12, Y9, Y9 \
	VANDPS     Y13, y, Y10    \
	VORPS      Y14, Y10, Y10  \
	VANDPS     Y9, Y10, Y10   \
	VADDPS     Y10, Y8, Y8    \
	VCVTTPS2DQ Y8, y

// func quantQ8a(dst *byte, x *float32, nblk int)
// q8_0 as quantizeQ8 (generic.go) computes it: d = amax/127 as f16,
// q = round(x·(1/d)) half away from zero, 0 where d is 0 as f16.
TEXT ·quantQ8a(SB), NOSPLIT, $0-24
	MOVQ         dst+0(FP), DI
	MOVQ         x+8(FP), SI
	MOVQ         nblk+16(FP), DX
	VBROADCASTSS qa_abs<>(SB), Y11
	VBROADCASTSS qa_half<>(SB), Y12
	VBROADCASTSS qa_sign<>(SB), Y13
	VBROADCASTSS qa_one<>(SB), Y14
	VMOVDQU      qa_order<>(SB), Y15

qaloop:
	TESTQ        DX, DX
	JZ           qadone
	VMOVUPS      (SI), Y0
	VMOVUPS      32(SI), Y1
	VMOVUPS      64(SI), Y2
	VMOVUPS      96(SI), Y3
	VANDPS       Y11, Y0, Y4
	VANDPS       Y11, Y1, Y5
	VANDPS       Y11, Y2, Y6
	VANDPS       Y11, Y3, Y7
	VMAXPS       Y5, Y4, Y4
	VMAXPS       Y7, Y6, Y6
	VMAXPS       Y6, Y4, Y4
	HMAX8(Y4, X4, X5)
	VDIVSS       qa_127<>(SB), X4, X4 // d = amax/127
	VMOVSS       qa_one<>(SB), X5
	VDIVSS       X4, X5, X5           // 1/d
	VCVTPS2PH    $0, X4, X6
	VPEXTRW      $0, X6, AX
	MOVW         AX, (DI)
	TESTL        $0x7fff, AX
	JNZ          qascale
	VXORPS       X5, X5, X5 // d is 0 as f16: so are the q

qascale:
	VBROADCASTSS X5, Y5
	VMULPS       Y5, Y0, Y0
	VMULPS       Y5, Y1, Y1
	VMULPS       Y5, Y2, Y2
	VMULPS       Y5, Y3, Y3
	QROUND8(Y0)
	QROUND8(Y1)
	QROUND8(Y2)
	QROUND8(Y3)
	// Packed within 128-bit lanes the bytes come out as dwords
	// [a0-3 b0-3 c0-3 d0-3 | a4-7 b4-7 c4-7 d4-7]; qa_order puts them back.
	VPACKSSDW    Y1, Y0, Y0
	VPACKSSDW    Y3, Y2, Y2
	VPACKSSWB    Y2, Y0, Y0
	VPERMD       Y0, Y15, Y0
	VMOVDQU      Y0, 2(DI)
	ADDQ         $128, SI
	ADDQ         $34, DI
	DECQ         DX
	JMP          qaloop

qadone:
	VZEROUPPER
	RET

DATA qa_ones8<>+0(SB)/4, $0x01010101
GLOBL qa_ones8<>(SB), RODATA|NOPTR, $4
DATA qa_ones16<>+0(SB)/4, $0x00010001
GLOBL qa_ones16<>(SB), RODATA|NOPTR, $4

// func p8Tab(tab *byte, xq *byte, nblk int)
// p8Table's rows (q4p8.go) for nblk q8_0 blocks: 8Σq as int32 and d as f32,
// each eight times. The sum is exact (VPMADDUBSW of ones and q, then
// VPMADDWD of ones), and so is F16C's conversion of d.
TEXT ·p8Tab(SB), NOSPLIT, $0-24
	MOVQ         tab+0(FP), DI
	MOVQ         xq+8(FP), SI
	MOVQ         nblk+16(FP), CX
	VPBROADCASTD qa_ones8<>(SB), Y4
	VPBROADCASTD qa_ones16<>(SB), Y5
	TESTQ        CX, CX
	JZ           ptdone

ptloop:
	VMOVDQU      2(SI), Y0
	VPMADDUBSW   Y0, Y4, Y0
	VPMADDWD     Y5, Y0, Y0
	VEXTRACTI128 $1, Y0, X1
	VPADDD       X1, X0, X0
	VPSHUFD      $0x4e, X0, X1
	VPADDD       X1, X0, X0
	VPSHUFD      $0xb1, X0, X1
	VPADDD       X1, X0, X0
	VPSLLD       $3, X0, X0
	VPBROADCASTD X0, Y0
	VMOVDQU      Y0, (DI)
	MOVWLZX      (SI), AX
	VMOVD        AX, X2
	VCVTPH2PS    X2, X2
	VBROADCASTSS X2, Y2
	VMOVUPS      Y2, 32(DI)
	ADDQ         $34, SI
	ADDQ         $64, DI
	DECQ         CX
	JNZ          ptloop

ptdone:
	VZEROUPPER
	RET
