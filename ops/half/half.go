// Package half converts between float32 and IEEE 754 binary16. It sits
// below ops and ops/avx2, which both need it and cannot import each other
// both ways.
package half

import "math"

// Decode converts an IEEE 754 binary16 value to float32 (exactly).
func Decode(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	man := uint32(h & 0x3ff)
	switch exp {
	case 0:
		// Subnormal: man*2^-24 is exact in float32.
		v := float32(man) * (1.0 / (1 << 24))
		return math.Float32frombits(sign | math.Float32bits(v))
	case 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | man<<13)
}

// Encode converts to IEEE 754 binary16 rounding to nearest, ties to even;
// overflow gives ±inf, NaN keeps its top payload bits and stays NaN.
func Encode(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23) & 0xff
	man := b & 0x7fffff
	if exp == 0xff {
		if man == 0 {
			return sign | 0x7c00
		}
		p := uint16(man >> 13)
		if p == 0 {
			p = 0x200 // payload lived in the dropped bits: keep it a NaN
		}
		return sign | 0x7c00 | p
	}
	e := exp - 127 + 15
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e >= 1 {
		r := uint32(e)<<10 | man>>13
		// A carry out of the mantissa correctly bumps the exponent (to inf at the top).
		return sign | uint16(roundShifted(r, man, 13))
	}
	// Result is subnormal (or zero): shift the full significand into man*2^-24.
	s := 14 - e
	if s > 25 {
		return sign // below half the smallest subnormal
	}
	full := man | 0x800000
	return sign | uint16(roundShifted(full>>uint(s), full, uint(s)))
}

// roundShifted rounds r = x>>s to nearest even using the s bits shifted out of x.
func roundShifted(r, x uint32, s uint) uint32 {
	rem := x & (1<<s - 1)
	half := uint32(1) << (s - 1)
	if rem > half || (rem == half && r&1 == 1) {
		r++
	}
	return r
}
