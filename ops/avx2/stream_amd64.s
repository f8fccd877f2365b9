//go:build amd64 && !purego

// sumRuns: a sum read as four runs side by side, the streaming read that
// bench's ceiling and the benchmarks' stream are measured with (stream.go).

#include "textflag.h"

// func sumRuns(a *float32, n int, q int) float32
// Four runs of n floats (a multiple of 16), q floats apart, 64 bytes of
// each a step.
TEXT ·sumRuns(SB), NOSPLIT, $0-28
	MOVQ   a+0(FP), AX
	MOVQ   n+8(FP), CX
	MOVQ   q+16(FP), R8
	SHLQ   $2, R8
	LEAQ   (AX)(R8*1), SI
	LEAQ   (SI)(R8*1), DI
	LEAQ   (DI)(R8*1), BX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	XORQ   DX, DX

step:
	CMPQ   DX, CX
	JGE    done
	VADDPS (AX)(DX*4), Y0, Y0
	VADDPS 32(AX)(DX*4), Y0, Y0
	VADDPS (SI)(DX*4), Y1, Y1
	VADDPS 32(SI)(DX*4), Y1, Y1
	VADDPS (DI)(DX*4), Y2, Y2
	VADDPS 32(DI)(DX*4), Y2, Y2
	VADDPS (BX)(DX*4), Y3, Y3
	VADDPS 32(BX)(DX*4), Y3, Y3
	ADDQ   $16, DX
	JMP    step

done:
	VADDPS       Y1, Y0, Y0
	VADDPS       Y3, Y2, Y2
	VADDPS       Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X1
	VHADDPS      X1, X1, X1
	VHADDPS      X1, X1, X1
	VZEROUPPER
	VMOVSS       X1, ret+24(FP)
	RET
