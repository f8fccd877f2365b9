//go:build amd64 && !purego

// The q4_0 mat-vec over rows packed eight at a time (q4p8.go): lane r of
// every register is row r.

#include "textflag.h"

DATA p8_low4<>+0(SB)/4, $0x0f0f0f0f
GLOBL p8_low4<>(SB), RODATA|NOPTR, $4
DATA p8_ones<>+0(SB)/4, $0x00010001
GLOBL p8_ones<>(SB), RODATA|NOPTR, $4

// CHUNK adds part c of the block at SI (its 32 bytes at 16+32c) times x's
// bytes 4c..4c+3 (low nibbles) and 16+4c.. (high) of the block at DI to
// the int16 sums Y0.
#define CHUNK(c) \
	VMOVDQU      (16+32*c)(SI), Y1   \
	VPSRLW       $4, Y1, Y2           \
	VPAND        Y14, Y1, Y1          \
	VPAND        Y14, Y2, Y2          \
	VPBROADCASTD (2+4*c)(DI), Y3      \
	VPBROADCASTD (18+4*c)(DI), Y4     \
	VPMADDUBSW   Y3, Y1, Y1           \
	VPMADDUBSW   Y4, Y2, Y2           \
	VPADDW       Y1, Y0, Y0           \
	VPADDW       Y2, Y0, Y0

// func gatherQ4p8(out *float32, p *byte, ngroups int, xq *byte, nblk int, tab *byte)
TEXT ·gatherQ4p8(SB), NOSPLIT, $0-48
	MOVQ         out+0(FP), R8
	MOVQ         p+8(FP), SI
	MOVQ         ngroups+16(FP), R9
	VPBROADCASTD p8_low4<>(SB), Y14
	VPBROADCASTD p8_ones<>(SB), Y13

group:
	TESTQ  R9, R9
	JZ     done
	VXORPS Y15, Y15, Y15
	MOVQ   xq+24(FP), DI
	MOVQ   tab+40(FP), DX
	MOVQ   nblk+32(FP), CX

block:
	PREFETCHT0   1152(SI)
	PREFETCHT0   1216(SI)
	VPXOR        Y0, Y0, Y0
	CHUNK(0)
	CHUNK(1)
	CHUNK(2)
	CHUNK(3)
	VPMADDWD     Y13, Y0, Y0
	VPSUBD       (DX), Y0, Y0
	VCVTDQ2PS    Y0, Y0
	VCVTPH2PS    (SI), Y1
	VMULPS       32(DX), Y1, Y1
	VFMADD231PS  Y1, Y0, Y15
	ADDQ         $144, SI
	ADDQ         $34, DI
	ADDQ         $64, DX
	DECQ         CX
	JNZ          block
	VMOVUPS      Y15, (R8)
	ADDQ         $32, R8
	DECQ         R9
	JMP          group

done:
	VZEROUPPER
	RET
