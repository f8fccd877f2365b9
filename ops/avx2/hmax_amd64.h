// A horizontal max shared by the hand-written quantizers (quantQ8v,
// quantQ8a, axpyQ4i16a's records).

// HMAX8 leaves in every lane of x, the low half of ymm y, the largest of
// y's eight floats; tx is a scratch xmm.
#define HMAX8(y, x, tx) \
	VEXTRACTF128 $1, y, tx \
	VMAXPS       tx, x, x  \
	VPERMILPS    $0x4e, x, tx \
	VMAXPS       tx, x, x  \
	VPERMILPS    $0xb1, x, tx \
	VMAXPS       tx, x, x
