//go:build amd64 && !purego

// exp for softmax in AVX-512: x = n·ln2 + r with |r| <= ln2/2, e^r by its
// Taylor polynomial to degree 6 (relative error under 2e-7 there), and
// VSCALEFPS for the 2^n, which also takes very negative x to 0.

#include "textflag.h"

DATA expc<>+0(SB)/4, $0x3fb8aa3b  // log2(e)
DATA expc<>+4(SB)/4, $0x3f318000  // ln2, high part (exact in 9 bits)
DATA expc<>+8(SB)/4, $0xb95e8083  // ln2 - high part
DATA expc<>+12(SB)/4, $0xc2d00000 // -104: below it e^x is 0 in float32
DATA expc<>+16(SB)/4, $0x3ab60b61 // 1/720
DATA expc<>+20(SB)/4, $0x3c088889 // 1/120
DATA expc<>+24(SB)/4, $0x3d2aaaab // 1/24
DATA expc<>+28(SB)/4, $0x3e2aaaab // 1/6
DATA expc<>+32(SB)/4, $0x3f000000 // 1/2
DATA expc<>+36(SB)/4, $0x3f800000 // 1
GLOBL expc<>(SB), RODATA|NOPTR, $40

// EXP16 sets z to e^(z - Z9) under mask k (Z10-Z13 scratch) and adds it
// to Z14.
#define EXP16(z, k) \
	VSUBPS          Z9, z, z                 \
	VMAXPS          z, Z15, z                \
	VMULPS.BCST     expc<>+0(SB), z, Z10     \
	VRNDSCALEPS     $0x08, Z10, Z10          \
	VFNMADD231PS.BCST expc<>+4(SB), Z10, z   \
	VFNMADD231PS.BCST expc<>+8(SB), Z10, z   \
	VBROADCASTSS    expc<>+16(SB), Z11       \
	VFMADD213PS.BCST expc<>+20(SB), z, Z11   \
	VFMADD213PS.BCST expc<>+24(SB), z, Z11   \
	VFMADD213PS.BCST expc<>+28(SB), z, Z11   \
	VFMADD213PS.BCST expc<>+32(SB), z, Z11   \
	VFMADD213PS.BCST expc<>+36(SB), z, Z11   \
	VFMADD213PS.BCST expc<>+36(SB), z, Z11   \
	VSCALEFPS       Z10, Z11, z              \
	VADDPS          z, Z14, k, Z14

// func expSum(x *float32, n int, m float32) float32
// x[i] = e^(x[i]-m) for i < n, and their sum.
TEXT ·expSum(SB), NOSPLIT, $0-28
	MOVQ         x+0(FP), SI
	MOVQ         n+8(FP), CX
	VBROADCASTSS m+16(FP), Z9
	VBROADCASTSS expc<>+12(SB), Z15
	VPXORD       Z14, Z14, Z14
	KXNORW       K1, K1, K1

e16:
	CMPQ      CX, $16
	JLT       etail
	VMOVUPS   (SI), Z0
	EXP16(Z0, K1)
	VMOVUPS   Z0, (SI)
	ADDQ      $64, SI
	SUBQ      $16, CX
	JMP       e16

etail:
	TESTQ     CX, CX
	JZ        esum
	MOVL      $1, AX
	SHLL      CX, AX
	DECL      AX
	KMOVW     AX, K2
	VMOVUPS.Z (SI), K2, Z0
	EXP16(Z0, K2)
	VMOVUPS   Z0, K2, (SI)

esum:
	VEXTRACTF64X4 $1, Z14, Y0
	VADDPS        Y0, Y14, Y0
	VEXTRACTF128  $1, Y0, X1
	VADDPS        X1, X0, X0
	VHADDPS       X0, X0, X0
	VHADDPS       X0, X0, X0
	VMOVSS        X0, ret+24(FP)
	VZEROUPPER
	RET
