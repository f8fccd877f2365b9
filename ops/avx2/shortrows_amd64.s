//go:build amd64 && !purego

// Short rows side by side, as a prompt's attention reads one head's cached
// keys and values (head_dim 64-128 values a row), in f32 and in f16, for
// four of the prompt's rows at once: each row is read from L2 once for the
// four, where the general gather and axpy kernels, a row of a prompt at a
// time, were bound by L2's bandwidth.

#include "textflag.h"
#include "rows_amd64.h"


// RSUM4 leaves the lane sums of a0..a3 in the low four lanes of t2
// (t0, t1 scratch; a0, a2 clobbered; K2 = 0x1111). VCOMPRESSPS straight to
// memory is microcoded on Zen 4 (~140 cycles), so it compresses in a
// register.
#define RSUM4(a0, a1, a2, a3, t0, t1, t2) \
	VSHUFF64X2  $0x44, a1, a0, t0 \
	VSHUFF64X2  $0xee, a1, a0, a0 \
	VADDPS      a0, t0, t0        \
	VSHUFF64X2  $0x44, a3, a2, t1 \
	VSHUFF64X2  $0xee, a3, a2, a2 \
	VADDPS      a2, t1, t1        \
	VSHUFF64X2  $0x88, t1, t0, t2 \
	VSHUFF64X2  $0xdd, t1, t0, t0 \
	VADDPS      t0, t2, t2        \
	VPERMILPS   $0x4e, t2, t0     \
	VADDPS      t0, t2, t2        \
	VPERMILPS   $0xb1, t2, t0     \
	VADDPS      t0, t2, t2        \
	VCOMPRESSPS t2, K2, t2

// FOURROWS points R9-R12 at the four rows from SI, BX bytes apart.
#define FOURROWS \
	MOVQ SI, R9           \
	LEAQ (SI)(BX*1), R10  \
	LEAQ (R10)(BX*1), R11 \
	LEAQ (R11)(BX*1), R12

// QMAC4 adds the current chunk of four rows (Z16-Z19) times x's chunk at
// xp+off (lanes of mask k) to a0..a3.
#define QMAC4(xp, off, k, a0, a1, a2, a3) \
	VMOVUPS.Z   (xp)(off*XS), k, Z20 \
	VFMADD231PS Z16, Z20, a0 \
	VFMADD231PS Z17, Z20, a1 \
	VFMADD231PS Z18, Z20, a2 \
	VFMADD231PS Z19, Z20, a3

// DOT4CHUNK adds the chunk at R13 of the four rows (R9-R12), the lanes of
// mask k, times the four x's (DX, AX, R15, R8) to Z0-Z15, four per x.
#define DOT4CHUNK(k) \
	LDRX(R9, R13, k, Z16)  \
	LDRX(R10, R13, k, Z17) \
	LDRX(R11, R13, k, Z18) \
	LDRX(R12, R13, k, Z19) \
	QMAC4(DX, R13, k, Z0, Z1, Z2, Z3)     \
	QMAC4(AX, R13, k, Z4, Z5, Z6, Z7)     \
	QMAC4(R15, R13, k, Z8, Z9, Z10, Z11)  \
	QMAC4(R8, R13, k, Z12, Z13, Z14, Z15)

// XMAC4 adds coef[CX] at cp times the row's chunks (Z16-Z19) to a0..a3.
#define XMAC4(cp, a0, a1, a2, a3) \
	VBROADCASTSS (cp)(CX*4), Z20 \
	VFMADD231PS  Z16, Z20, a0 \
	VFMADD231PS  Z17, Z20, a1 \
	VFMADD231PS  Z18, Z20, a2 \
	VFMADD231PS  Z19, Z20, a3

// MASKS4 sets K1-K4 from the four 16-bit fields of AX, low first.
#define MASKS4 \
	KMOVW AX, K1 \
	SHRQ  $16, AX \
	KMOVW AX, K2 \
	SHRQ  $16, AX \
	KMOVW AX, K3 \
	SHRQ  $16, AX \
	KMOVW AX, K4

// YLOAD4 and YSTORE4 move 64 floats of y at p, masked by K1-K4.
#define YLOAD4(p, a0, a1, a2, a3) \
	VMOVUPS.Z (p), K1, a0 \
	VMOVUPS.Z 64(p), K2, a1 \
	VMOVUPS.Z 128(p), K3, a2 \
	VMOVUPS.Z 192(p), K4, a3

#define YSTORE4(p, a0, a1, a2, a3) \
	VMOVUPS a0, K1, (p) \
	VMOVUPS a1, K2, 64(p) \
	VMOVUPS a2, K3, 128(p) \
	VMOVUPS a3, K4, 192(p)

// ROWCHUNKS loads the row at p's four chunks (masks K1-K4) as f32.
#define ROWCHUNKS(p, z0, z1, z2, z3) \
	LDRD(0, p, K1, z0)       \
	LDRD(RCH, p, K2, z1)     \
	LDRD((2*RCH), p, K3, z2) \
	LDRD((3*RCH), p, K4, z3)

#define DOTROWS4 ·dotRowsF32x4
#define AXPYROWS4 ·axpyRowsF32x4
#define LDRX(p, off, k, z) VMOVUPS.Z (p)(off*1), k, z
#define LDRD(d, p, k, z) VMOVUPS.Z d(p), k, z
#define RCH 64
#define XS 1
#include "shortrows_amd64.h"
#undef DOTROWS4
#undef AXPYROWS4
#undef LDRX
#undef LDRD
#undef RCH
#undef XS

#define DOTROWS4 ·dotRowsF16x4
#define AXPYROWS4 ·axpyRowsF16x4
#define LDRX(p, off, k, z) VCVTPH2PS.Z (p)(off*1), k, z
#define LDRD(d, p, k, z) VCVTPH2PS.Z d(p), k, z
#define RCH 32
#define XS 2
#include "shortrows_amd64.h"
