// Row addressing and prefetching shared by the hand-written kernels
// (kernels512_amd64.s, kernels_q8f_amd64.s). Register conventions: R8 the
// row ids, SI the weights, BX the row stride, R12 the current k, R9 the
// last valid k.

// ROWPTR sets r to the address of row rows[k+i].
#define ROWPTR(i, k, r) \
	MOVLQSX (i*4)(R8)(k*4), r \
	IMULQ   BX, r             \
	ADDQ    SI, r

// PFPTR stores at slot(SP) the address of row rows[min(k+d, R9)].
#define PFPTR(d, slot) \
	LEAQ    d(R12), DI      \
	CMPQ    DI, R9          \
	CMOVQGT R9, DI          \
	MOVLQSX (R8)(DI*4), DI  \
	IMULQ   BX, DI          \
	ADDQ    SI, DI          \
	MOVQ    DI, slot(SP)

// PF prefetches the line at off in the row whose address is at slot(SP).
#define PF(slot, off) \
	MOVQ       slot(SP), DI \
	PREFETCHT1 (DI)(off*1)

// PF2 covers a 72-byte step (one prefetch would skip every ninth line),
// loading the address into r.
#define PF2(slot, off, r) \
	MOVQ       slot(SP), r   \
	PREFETCHT1 (r)(off*1)    \
	PREFETCHT1 64(r)(off*1)

// PACKD leaves the f16 scales of the four rows' blocks at CX (rows in AX,
// DX, R13, R14) in DI, row 0 in the low bits, so that one conversion
// serves all four.
#define PACKD \
	MOVWLZX (R14)(CX*1), DI \
	SHLQ    $16, DI         \
	MOVWLZX (R13)(CX*1), SI \
	ORQ     SI, DI          \
	SHLQ    $16, DI         \
	MOVWLZX (DX)(CX*1), SI  \
	ORQ     SI, DI          \
	SHLQ    $16, DI         \
	MOVWLZX (AX)(CX*1), SI  \
	ORQ     SI, DI
