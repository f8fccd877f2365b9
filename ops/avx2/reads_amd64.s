//go:build amd64 && !purego

// readRows: gatherQ4_0's reads without its arithmetic, the ceiling that
// BenchmarkGatherShare holds the gather against (reads_amd64.go).

#include "textflag.h"

// ROWPTR sets R to the address of row rows[k+i] (rows in SI, w in DI,
// stride in DX, k in CX).
#define ROWPTR(i, R) \
	MOVLQSX (4*i)(SI)(CX*4), R \
	IMULQ   DX, R              \
	ADDQ    DI, R

// NEXTPTR sets R to the address of row rows[min(j+i, last)] (j in AX,
// last in BX).
#define NEXTPTR(i, R) \
	LEAQ    i(AX), R           \
	CMPQ    R, BX              \
	CMOVQGT BX, R              \
	MOVLQSX (SI)(R*4), R       \
	IMULQ   DX, R              \
	ADDQ    DI, R

// RD reads the line at offset AX of the row at R into the ORs in Y0, Y1.
#define RD(R) \
	VPOR (R)(AX*1), Y0, Y0 \
	VPOR 32(R)(AX*1), Y1, Y1

// func readRows(w *byte, stride int, rows *int32, n int, lines int, dist int) uint64
TEXT ·readRows(SB), NOSPLIT, $16-56
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	XORQ  CX, CX

group:
	MOVQ n+24(FP), BX
	LEAQ -4(BX), AX
	CMPQ CX, AX
	JGT  tail
	DECQ BX
	MOVQ rows+16(FP), SI
	MOVQ w+0(FP), DI
	MOVQ stride+8(FP), DX
	MOVQ dist+40(FP), AX
	ADDQ CX, AX
	NEXTPTR(3, R12)
	MOVQ R12, q3-8(SP)
	NEXTPTR(2, R12)
	MOVQ R12, q2-16(SP)
	NEXTPTR(1, R13)
	NEXTPTR(0, R12)
	ROWPTR(0, R8)
	ROWPTR(1, R9)
	ROWPTR(2, R10)
	ROWPTR(3, R11)
	MOVQ q2-16(SP), DI
	MOVQ q3-8(SP), SI
	MOVQ lines+32(FP), BX
	SHLQ $6, BX
	XORQ AX, AX

line:
	RD(R8)
	RD(R9)
	RD(R10)
	RD(R11)
	PREFETCHT1 (R12)(AX*1)
	PREFETCHT1 (R13)(AX*1)
	PREFETCHT1 (DI)(AX*1)
	PREFETCHT1 (SI)(AX*1)
	ADDQ       $64, AX
	CMPQ       AX, BX
	JLT        line
	ADDQ       $4, CX
	JMP        group

tail:
	CMPQ CX, n+24(FP)
	JGE  done
	MOVQ rows+16(FP), SI
	MOVQ w+0(FP), DI
	MOVQ stride+8(FP), DX
	ROWPTR(0, R8)
	MOVQ lines+32(FP), BX
	SHLQ $6, BX
	XORQ AX, AX

tailline:
	RD(R8)
	ADDQ $64, AX
	CMPQ AX, BX
	JLT  tailline
	INCQ CX
	JMP  tail

done:
	VPOR         Y1, Y0, Y0
	VEXTRACTI128 $1, Y0, X1
	VPOR         X1, X0, X0
	VZEROUPPER
	MOVQ         X0, AX
	MOVQ         AX, ret+48(FP)
	RET
