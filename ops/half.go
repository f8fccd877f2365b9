package ops

import (
	"math"

	"github.com/pinfer/pinfer/ops/avx2"
	"github.com/pinfer/pinfer/ops/half"
)

// f16Table maps every half bit pattern to its float32 value: a 256 KiB table
// is cheaper than decoding exponent and subnormals per element in a dot loop.
var f16Table [1 << 16]float32

func init() {
	for h := range f16Table {
		f16Table[h] = half.Decode(uint16(h))
	}
}

// F16ToF32 converts an IEEE 754 binary16 value to float32 (exactly).
func F16ToF32(h uint16) float32 { return f16Table[h] }

// F32ToF16 converts to IEEE 754 binary16 rounding to nearest, ties to even;
// overflow gives ±inf, NaN keeps its top payload bits and stays NaN.
func F32ToF16(f float32) uint16 { return half.Encode(f) }

// EncodeF16 converts src to binary16 in dst (len(dst) >= len(src)), as
// F32ToF16 does, on the vector instruction when Fast.
func EncodeF16(dst []uint16, src []float32) {
	if Fast {
		avx2.EncodeF16(dst, src)
		return
	}
	for i, v := range src {
		dst[i] = F32ToF16(v)
	}
}

// BF16ToF32 converts a bfloat16 value to float32 (exactly).
func BF16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// F32ToBF16 converts to bfloat16 rounding to nearest, ties to even; NaN stays
// NaN (quieted, so truncating the payload cannot turn it into inf).
func F32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x40
	}
	return uint16((b + 0x7fff + (b>>16)&1) >> 16)
}
