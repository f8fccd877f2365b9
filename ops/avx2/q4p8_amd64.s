//go:build amd64 && !purego

// The q4_0 mat-vec and mat-mul over rows packed eight at a time (q4p8.go):
// lane r of every register is row r.

#include "textflag.h"

DATA p8_low4<>+0(SB)/4, $0x0f0f0f0f
GLOBL p8_low4<>(SB), RODATA|NOPTR, $4
DATA p8_ones<>+0(SB)/4, $0x00010001
GLOBL p8_ones<>(SB), RODATA|NOPTR, $4

// X4ARGS loads the four-token kernels' arguments (N, the count of groups
// or pairs, into R9): out in R8, ldo and 3·ldo in bytes in AX and BX, p in
// SI, the strides of x and of the table between tokens (and three times
// them) in R10, R11 and R12, R13.
#define X4ARGS(N) \
	MOVQ         out+0(FP), R8 \
	MOVQ         ldo+8(FP), AX \
	SHLQ         $2, AX \
	LEAQ         (AX)(AX*2), BX \
	MOVQ         p+16(FP), SI \
	MOVQ         N+24(FP), R9 \
	MOVQ         nblk+40(FP), R10 \
	IMULQ        $34, R10 \
	LEAQ         (R10)(R10*2), R11 \
	MOVQ         nblk+40(FP), R12 \
	SHLQ         $6, R12 \
	LEAQ         (R12)(R12*2), R13

// UNPACKP loads part c of the block at P (its 32 bytes at 16+32c) into
// L (low nibbles) and H (high); Y14 holds 0x0f bytes. UNPACK is the block
// at SI into Y1 and Y2.
#define UNPACKP(c, P, L, H) \
	VMOVDQU (16+32*c)(P), L \
	VPSRLW  $4, L, H         \
	VPAND   Y14, L, L        \
	VPAND   Y14, H, H

#define UNPACK(c) UNPACKP(c, SI, Y1, Y2)

// TOK adds the unpacked part c times token X's x (at X, e.g.
// (DI)(R10*1): bytes 4c..4c+3 against the low nibbles, 16+4c.. against the
// high) to the int16 sums A.
#define TOK(c, X, A) \
	VPBROADCASTD (2+4*c)X, Y3   \
	VPMADDUBSW   Y3, Y1, Y3     \
	VPADDW       Y3, A, A       \
	VPBROADCASTD (18+4*c)X, Y3  \
	VPMADDUBSW   Y3, Y2, Y3     \
	VPADDW       Y3, A, A

// FIN scales token X's block sums A (its p8Table entry at X) into F: the
// d of the eight rows are in Y12, int16 ones in Y13.
#define FIN(X, A, F) \
	VPMADDWD    Y13, A, A     \
	VPSUBD      X, A, A       \
	VCVTDQ2PS   A, A          \
	VMULPS      32X, Y12, Y3  \
	VFMADD231PS Y3, A, F

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
	UNPACK(0)
	TOK(0, (DI), Y0)
	UNPACK(1)
	TOK(1, (DI), Y0)
	UNPACK(2)
	TOK(2, (DI), Y0)
	UNPACK(3)
	TOK(3, (DI), Y0)
	VCVTPH2PS    (SI), Y12
	FIN((DX), Y0, Y15)
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

// gatherQ4p8x2 is gatherQ4p8 over two runs of groups at once, poff bytes
// apart in p and ooff bytes apart in out, each step a block of each: on
// two threads a core that reads two streams read 97-99% of the streaming
// read against 90-91% for one (ops/avx2/NOTES.md, stop 26). Each broadcast
// of x serves both runs' blocks: B's nibbles in Y8, Y9, its sums in Y4 and
// Y5.

#define UNPACK2(c) \
	UNPACK(c)                 \
	UNPACKP(c, BX, Y8, Y9)

#define TOK2(c) \
	VPBROADCASTD (2+4*c)(DI), Y3  \
	VPMADDUBSW   Y3, Y1, Y10      \
	VPADDW       Y10, Y0, Y0      \
	VPMADDUBSW   Y3, Y8, Y11      \
	VPADDW       Y11, Y4, Y4      \
	VPBROADCASTD (18+4*c)(DI), Y3 \
	VPMADDUBSW   Y3, Y2, Y10      \
	VPADDW       Y10, Y0, Y0      \
	VPMADDUBSW   Y3, Y9, Y11      \
	VPADDW       Y11, Y4, Y4

// func gatherQ4p8x2(out *float32, p *byte, ngroups int, xq *byte, nblk int, tab *byte, poff int, ooff int)
TEXT ·gatherQ4p8x2(SB), NOSPLIT, $0-64
	MOVQ         out+0(FP), R8
	MOVQ         p+8(FP), SI
	MOVQ         ngroups+16(FP), R9
	MOVQ         poff+48(FP), R10
	MOVQ         ooff+56(FP), R11
	VPBROADCASTD p8_low4<>(SB), Y14
	VPBROADCASTD p8_ones<>(SB), Y13

group2:
	TESTQ  R9, R9
	JZ     done2
	VXORPS Y15, Y15, Y15
	VXORPS Y5, Y5, Y5
	LEAQ   (SI)(R10*1), BX
	MOVQ   xq+24(FP), DI
	MOVQ   tab+40(FP), DX
	MOVQ   nblk+32(FP), CX

block2:
	PREFETCHT0   1152(SI)
	PREFETCHT0   1216(SI)
	PREFETCHT0   1152(BX)
	PREFETCHT0   1216(BX)
	VPXOR        Y0, Y0, Y0
	VPXOR        Y4, Y4, Y4
	UNPACK2(0)
	TOK2(0)
	UNPACK2(1)
	TOK2(1)
	UNPACK2(2)
	TOK2(2)
	UNPACK2(3)
	TOK2(3)
	VCVTPH2PS    (SI), Y12
	FIN((DX), Y0, Y15)
	VCVTPH2PS    (BX), Y12
	FIN((DX), Y4, Y5)
	ADDQ         $144, SI
	ADDQ         $144, BX
	ADDQ         $34, DI
	ADDQ         $64, DX
	DECQ         CX
	JNZ          block2
	VMOVUPS      Y15, (R8)
	VMOVUPS      Y5, (R8)(R11*1)
	ADDQ         $32, R8
	DECQ         R9
	JMP          group2

done2:
	VZEROUPPER
	RET

// The same over four tokens at once (gatherQ4p8x4): each 32-byte part is
// loaded and unpacked once for the four, and the block's d once. Tokens
// 1-3 of xq and tab sit one token's stride (R10, R12) apart, their outputs
// ldo floats (AX bytes) apart.

#define CHUNK4(c) \
	UNPACK(c)                       \
	TOK(c, (DI), Y4)                \
	TOK(c, (DI)(R10*1), Y5)         \
	TOK(c, (DI)(R10*2), Y6)         \
	TOK(c, (DI)(R11*1), Y7)

// func gatherQ4p8x4(out *float32, ldo int, p *byte, ngroups int, xq *byte, nblk int, tab *byte)
TEXT ·gatherQ4p8x4(SB), NOSPLIT, $0-56
	X4ARGS(ngroups)
	VPBROADCASTD p8_low4<>(SB), Y14
	VPBROADCASTD p8_ones<>(SB), Y13

group4:
	TESTQ  R9, R9
	JZ     done4
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11
	MOVQ   xq+32(FP), DI
	MOVQ   tab+48(FP), DX
	MOVQ   nblk+40(FP), CX

block4:
	PREFETCHT0 1152(SI)
	PREFETCHT0 1216(SI)
	VPXOR      Y4, Y4, Y4
	VPXOR      Y5, Y5, Y5
	VPXOR      Y6, Y6, Y6
	VPXOR      Y7, Y7, Y7
	CHUNK4(0)
	CHUNK4(1)
	CHUNK4(2)
	CHUNK4(3)
	VCVTPH2PS  (SI), Y12
	FIN((DX), Y4, Y8)
	FIN((DX)(R12*1), Y5, Y9)
	FIN((DX)(R12*2), Y6, Y10)
	FIN((DX)(R13*1), Y7, Y11)
	ADDQ       $144, SI
	ADDQ       $34, DI
	ADDQ       $64, DX
	DECQ       CX
	JNZ        block4
	VMOVUPS    Y8, (R8)
	VMOVUPS    Y9, (R8)(AX*1)
	VMOVUPS    Y10, (R8)(AX*2)
	VMOVUPS    Y11, (R8)(BX*1)
	ADDQ       $32, R8
	DECQ       R9
	JMP        group4

done4:
	VZEROUPPER
	RET

// gatherQ4p8r4 is gatherQ4p8x2 over four runs, poff bytes apart in p and
// ooff bytes apart in out. x's two broadcasts of a part serve the four
// runs' blocks, each run's nibbles unpacked in turn into Y1 and Y2; the
// runs' int16 sums are Y0, Y4, Y8, Y9 and their f32 sums Y15, Y5, Y6, Y7.
// With ahead > 0 it asks for each run's lines ahead bytes on (three
// PREFETCHT0 a run and step, 48 bytes apart, so that no line of the
// 144-byte step is passed over); with 0, for none, leaving the four runs to
// the hardware's prefetcher. Which pays depends on the core
// (p8Ahead, ops/avx2/NOTES.md, stops 27 and 34).

#define RUN4(c, P, A) \
	UNPACKP(c, P, Y1, Y2)       \
	VPMADDUBSW Y3, Y1, Y1       \
	VPADDW     Y1, A, A         \
	VPMADDUBSW Y10, Y2, Y2      \
	VPADDW     Y2, A, A

#define PART4(c) \
	VPBROADCASTD (2+4*c)(DI), Y3   \
	VPBROADCASTD (18+4*c)(DI), Y10 \
	RUN4(c, SI, Y0)                \
	RUN4(c, BX, Y4)                \
	RUN4(c, R12, Y8)               \
	RUN4(c, R13, Y9)

// PF4(R) asks for the lines ahead (R14) bytes on of the step at R.
#define PF4(R) \
	PREFETCHT0 (R)(R14*1)   \
	PREFETCHT0 48(R)(R14*1) \
	PREFETCHT0 96(R)(R14*1)

// func gatherQ4p8r4(out *float32, p *byte, ngroups int, xq *byte, nblk int, tab *byte, poff int, ooff int, ahead int)
TEXT ·gatherQ4p8r4(SB), NOSPLIT, $0-72
	MOVQ         out+0(FP), R8
	MOVQ         p+8(FP), SI
	MOVQ         ngroups+16(FP), R9
	MOVQ         poff+48(FP), R10
	MOVQ         ooff+56(FP), R11
	LEAQ         (R11)(R11*2), AX
	VPBROADCASTD p8_low4<>(SB), Y14
	VPBROADCASTD p8_ones<>(SB), Y13
	MOVQ         ahead+64(FP), R14

groupr4:
	TESTQ  R9, R9
	JZ     doner4
	VXORPS Y15, Y15, Y15
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	LEAQ   (SI)(R10*1), BX
	LEAQ   (SI)(R10*2), R12
	LEAQ   (BX)(R10*2), R13
	MOVQ   xq+24(FP), DI
	MOVQ   tab+40(FP), DX
	MOVQ   nblk+32(FP), CX

blockr4:
	TESTQ        R14, R14
	JZ           nopfr4
	PF4(SI)
	PF4(BX)
	PF4(R12)
	PF4(R13)

nopfr4:
	VPXOR        Y0, Y0, Y0
	VPXOR        Y4, Y4, Y4
	VPXOR        Y8, Y8, Y8
	VPXOR        Y9, Y9, Y9
	PART4(0)
	PART4(1)
	PART4(2)
	PART4(3)
	VCVTPH2PS    (SI), Y12
	FIN((DX), Y0, Y15)
	VCVTPH2PS    (BX), Y12
	FIN((DX), Y4, Y5)
	VCVTPH2PS    (R12), Y12
	FIN((DX), Y8, Y6)
	VCVTPH2PS    (R13), Y12
	FIN((DX), Y9, Y7)
	ADDQ         $144, SI
	ADDQ         $144, BX
	ADDQ         $144, R12
	ADDQ         $144, R13
	ADDQ         $34, DI
	ADDQ         $64, DX
	DECQ         CX
	JNZ          blockr4
	VMOVUPS      Y15, (R8)
	VMOVUPS      Y5, (R8)(R11*1)
	VMOVUPS      Y6, (R8)(R11*2)
	VMOVUPS      Y7, (R8)(AX*1)
	ADDQ         $32, R8
	DECQ         R9
	JMP          groupr4

doner4:
	VZEROUPPER
	RET

// gatherQ4p8z4 is gatherQ4p8x4 in AVX-512 with VNNI, over two groups at
// once (npairs pairs; group g+1 is gb = 144·nblk bytes on in p): lanes 0-7
// of a zmm are group g's rows, lanes 8-15 group g+1's, so each of a
// token's x dwords is one embedded broadcast for sixteen rows, and
// VPDPBUSD sums the unsigned nibbles' products into int32 with no int16
// step. The rows' sixteen outputs of a token are one store.

#define ZPART(c) \
	VMOVDQU           (16+32*c)(SI), Y1                 \
	VINSERTI64X4      $1, (16+32*c)(SI)(R14*1), Z1, Z1  \
	VPSRLW            $4, Z1, Z2                        \
	VPANDD            Z14, Z1, Z1                       \
	VPANDD            Z14, Z2, Z2                       \
	VPDPBUSD.BCST     (2+4*c)(DI), Z1, Z4               \
	VPDPBUSD.BCST     (18+4*c)(DI), Z2, Z4              \
	VPDPBUSD.BCST     (2+4*c)(DI)(R10*1), Z1, Z5        \
	VPDPBUSD.BCST     (18+4*c)(DI)(R10*1), Z2, Z5       \
	VPDPBUSD.BCST     (2+4*c)(DI)(R10*2), Z1, Z6        \
	VPDPBUSD.BCST     (18+4*c)(DI)(R10*2), Z2, Z6       \
	VPDPBUSD.BCST     (2+4*c)(DI)(R11*1), Z1, Z7        \
	VPDPBUSD.BCST     (18+4*c)(DI)(R11*1), Z2, Z7

// ZFIN is FIN for sixteen rows: the d of both groups are in Z12.
#define ZFIN(X, A, F) \
	VPSUBD.BCST  X, A, A     \
	VCVTDQ2PS    A, A        \
	VMULPS.BCST  32X, Z12, Z3 \
	VFMADD231PS  Z3, A, F

// func gatherQ4p8z4(out *float32, ldo int, p *byte, npairs int, xq *byte, nblk int, tab *byte)
TEXT ·gatherQ4p8z4(SB), NOSPLIT, $0-56
	X4ARGS(npairs)
	MOVQ         nblk+40(FP), R14
	IMULQ        $144, R14
	VPBROADCASTD p8_low4<>(SB), Z14

pairz:
	TESTQ  R9, R9
	JZ     donez
	VXORPS Z8, Z8, Z8
	VXORPS Z9, Z9, Z9
	VXORPS Z10, Z10, Z10
	VXORPS Z11, Z11, Z11
	MOVQ   xq+32(FP), DI
	MOVQ   tab+48(FP), DX
	MOVQ   nblk+40(FP), CX

blockz:
	PREFETCHT0   1152(SI)
	PREFETCHT0   1216(SI)
	PREFETCHT0   1152(SI)(R14*1)
	PREFETCHT0   1216(SI)(R14*1)
	VPXORD       Z4, Z4, Z4
	VPXORD       Z5, Z5, Z5
	VPXORD       Z6, Z6, Z6
	VPXORD       Z7, Z7, Z7
	ZPART(0)
	ZPART(1)
	ZPART(2)
	ZPART(3)
	VMOVDQU      (SI), X12
	VINSERTI128  $1, (SI)(R14*1), Y12, Y12
	VCVTPH2PS    Y12, Z12
	ZFIN((DX), Z4, Z8)
	ZFIN((DX)(R12*1), Z5, Z9)
	ZFIN((DX)(R12*2), Z6, Z10)
	ZFIN((DX)(R13*1), Z7, Z11)
	ADDQ         $144, SI
	ADDQ         $34, DI
	ADDQ         $64, DX
	DECQ         CX
	JNZ          blockz
	VMOVUPS      Z8, (R8)
	VMOVUPS      Z9, (R8)(AX*1)
	VMOVUPS      Z10, (R8)(AX*2)
	VMOVUPS      Z11, (R8)(BX*1)
	ADDQ         $64, R8
	ADDQ         R14, SI
	DECQ         R9
	JMP          pairz

donez:
	VZEROUPPER
	RET
