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

// ROWSTART(cnt, short) goes to short when fewer than cnt rows are left
// from k (R12), else loads the row ids, weights and stride (R8, SI, BX),
// with R9 the row count. Every kernel that reads it has the frame (_, w,
// stride, rows, n, ...).
#define ROWSTART(cnt, short) \
	MOVQ n+32(FP), R9       \
	LEAQ cnt(R12), BX       \
	CMPQ BX, R9             \
	JGT  short              \
	MOVQ rows+24(FP), R8    \
	MOVQ w+8(FP), SI        \
	MOVQ stride+16(FP), BX

// PFAHEAD4 stores the addresses of the rows eight to eleven ahead at
// 0-24(SP) (R9 the last valid k).
#define PFAHEAD4 \
	PFPTR(8, 0)             \
	PFPTR(9, 8)             \
	PFPTR(10, 16)           \
	PFPTR(11, 24)

// ROWS4(short) starts a step over the four rows rows[k..k+3] (k in R12):
// to short when fewer are left, else their addresses in AX, DX, R13, R14,
// R9 the last valid k and the rows eight ahead's addresses at 0-24(SP).
#define ROWS4(short) \
	ROWSTART(4, short)      \
	ROWPTR(0, R12, AX)      \
	ROWPTR(1, R12, DX)      \
	ROWPTR(2, R12, R13)     \
	ROWPTR(3, R12, R14)     \
	DECQ R9                 \
	PFAHEAD4

// ROWS8(short) is ROWS4 for the eight rows rows[k..k+7]: their addresses
// in AX, DX, R13, R14, R15, R9, DI, R12 (so k is kept at 64(SP)), the rows
// eight ahead's at 0-56(SP).
#define ROWS8(short) \
	ROWSTART(8, short)      \
	DECQ R9                 \
	PFAHEAD4                \
	PFPTR(12, 32)           \
	PFPTR(13, 40)           \
	PFPTR(14, 48)           \
	PFPTR(15, 56)           \
	MOVQ R12, 64(SP)        \
	ROWPTR(0, R12, AX)      \
	ROWPTR(1, R12, DX)      \
	ROWPTR(2, R12, R13)     \
	ROWPTR(3, R12, R14)     \
	ROWPTR(4, R12, R15)     \
	ROWPTR(5, R12, R9)      \
	ROWPTR(6, R12, DI)      \
	ROWPTR(7, R12, R12)

// ROW1(done) starts a step over the one row rows[k] (k in R12, R9 the
// count left by ROWS4): to done when none is left, else its address in AX.
#define ROW1(done) \
	CMPQ R12, R9            \
	JGE  done               \
	MOVQ rows+24(FP), R8    \
	MOVQ w+8(FP), SI        \
	MOVQ stride+16(FP), BX  \
	ROWPTR(0, R12, AX)

// The row kernels' prefetches ask for L1 (PREFETCHT0). On the Zen 5 host
// the q4_0 gather read 68-73% of the one-thread stream at 10-50% of rows
// with T0 against 61-66% with T1 (GatherShare, ops/avx2/NOTES.md, stop 34);
// on Zen 3 the two were within noise (stop 22).

// PF prefetches the line at off in the row whose address is at slot(SP).
#define PF(slot, off) \
	MOVQ       slot(SP), DI \
	PREFETCHT0 (DI)(off*1)

// PF2 covers a 72-byte step (one prefetch would skip every ninth line),
// loading the address into r.
#define PF2(slot, off, r) \
	MOVQ       slot(SP), r   \
	PREFETCHT0 (r)(off*1)    \
	PREFETCHT0 64(r)(off*1)

// PF3 is PF2 reaching a line further, so that each line is asked for
// about three times rather than twice as the steps pass it: decode gained
// 2-6% (ops/avx2/NOTES.md), as if some prefetches were dropped.
#define PF3(slot, off, r) \
	PF2(slot, off, r)        \
	PREFETCHT0 128(r)(off*1)

// PF3D is PF3 for a row read downwards: the lines at off-64, off, off+64.
#define PF3D(slot, off, r) \
	MOVQ       slot(SP), r   \
	PREFETCHT0 -64(r)(off*1) \
	PREFETCHT0 (r)(off*1)    \
	PREFETCHT0 64(r)(off*1)

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

// ZERO4 zeroes four accumulators.
#define ZERO4(a0, a1, a2, a3) \
	VPXORD a0, a0, a0 \
	VPXORD a1, a1, a1 \
	VPXORD a2, a2, a2 \
	VPXORD a3, a3, a3
