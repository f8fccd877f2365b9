package ops

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// f16Ref decodes a half from its definition, in float64.
func f16Ref(h uint16) float64 {
	s := 1.0
	if h&0x8000 != 0 {
		s = -1
	}
	e, m := int(h>>10&0x1f), float64(h&0x3ff)
	switch e {
	case 0:
		return s * math.Ldexp(m, -24)
	case 31:
		if m == 0 {
			return math.Inf(int(s))
		}
		return math.NaN()
	}
	return s * math.Ldexp(1+m/1024, e-15)
}

func TestF16Exhaustive(t *testing.T) {
	for i := range 1 << 16 {
		h := uint16(i)
		f := F16ToF32(h)
		want := f16Ref(h)
		if math.IsNaN(want) {
			require.True(t, f != f, "h=%#04x", h)
		} else {
			require.Equal(t, want, float64(f), "h=%#04x", h)
			require.Equal(t, h&0x8000 != 0, math.Signbit(float64(f)), "sign of h=%#04x", h)
		}
		require.Equal(t, h, F32ToF16(f), "round trip of h=%#04x", h)
	}
}

func TestF32ToF16Values(t *testing.T) {
	cases := []struct {
		f float32
		h uint16
	}{
		{1, 0x3c00},
		{-2, 0xc000},
		{0.5, 0x3800},
		{65504, 0x7bff},
		{65519, 0x7bff}, // below the midpoint to 65536
		{65520, 0x7c00}, // midpoint, 0x7bff is odd: ties to even = inf
		{1e9, 0x7c00},
		{float32(math.Inf(-1)), 0xfc00},
		{0x1p-24, 0x0001},               // smallest subnormal
		{0x1p-25, 0x0000},               // half of it ties to even zero
		{0x1.8p-25, 0x0001},             // 0.75 of it rounds up
		{0x1.8p-24, 0x0002},             // 1.5 ulp ties to even 2
		{0x1p-14, 0x0400},               // smallest normal
		{0x1.ff8p-15, 0x03ff},           // largest subnormal
		{0x1.ffcp-15, 0x0400},           // its tie with 2^-14 goes to the even normal
		{1 + 0x1p-11, 0x3c00},           // tie, 0x3c00 even
		{1 + 3*0x1p-11, 0x3c02},         // tie, 0x3c01 odd
		{1 + 0x1p-11 + 0x1p-20, 0x3c01}, // just above the tie
		{float32(math.Copysign(0, -1)), 0x8000},
		{0x1p-40, 0x0000},
	}
	for _, c := range cases {
		assert.Equal(t, c.h, F32ToF16(c.f), "F32ToF16(%g)", c.f)
	}
	n := F32ToF16(float32(math.NaN()))
	assert.True(t, n&0x7c00 == 0x7c00 && n&0x3ff != 0, "nan -> %#04x", n)
	// A NaN whose payload sits only in the bits f16 drops must not become inf.
	n = F32ToF16(math.Float32frombits(0xff800001))
	assert.True(t, n&0x7c00 == 0x7c00 && n&0x3ff != 0 && n&0x8000 != 0, "nan -> %#04x", n)
}

// TestF32ToF16Nearest checks rounding against a search over all finite halves.
func TestF32ToF16Nearest(t *testing.T) {
	var vals []float64 // non-negative finite halves; index = bit pattern
	for h := range 0x7c00 {
		vals = append(vals, f16Ref(uint16(h)))
	}
	require.True(t, sort.Float64sAreSorted(vals))
	r := rand.New(rand.NewPCG(1, 2))
	for range 200000 {
		// Exponents around the f16 range, random mantissas.
		f := math.Float32frombits(uint32(r.IntN(60)+127-30)<<23 | r.Uint32()&0x7fffff)
		v := float64(f)
		i := sort.SearchFloat64s(vals, v) // first >= v
		var want uint16
		switch {
		case i == len(vals):
			top := vals[len(vals)-1]
			if v-top < 16 { // 65536 would be the next value: below its midpoint rounds down
				want = 0x7bff
			} else {
				want = 0x7c00
			}
		case vals[i] == v || i == 0:
			want = uint16(i)
		default:
			lo, hi := v-vals[i-1], vals[i]-v
			switch {
			case lo < hi:
				want = uint16(i - 1)
			case hi < lo:
				want = uint16(i)
			case (i-1)&1 == 0:
				want = uint16(i - 1)
			default:
				want = uint16(i)
			}
		}
		require.Equal(t, want, F32ToF16(f), "F32ToF16(%g)", v)
		require.Equal(t, want|0x8000, F32ToF16(-f), "F32ToF16(%g)", -v)
	}
}

func TestBF16(t *testing.T) {
	for i := range 1 << 16 {
		h := uint16(i)
		f := BF16ToF32(h)
		if h&0x7f80 == 0x7f80 && h&0x7f != 0 {
			require.True(t, f != f, "h=%#04x", h)
			n := F32ToBF16(f)
			require.True(t, n&0x7f80 == 0x7f80 && n&0x7f != 0, "nan %#04x -> %#04x", h, n)
			continue
		}
		require.Equal(t, h, F32ToBF16(f), "round trip of %#04x", h)
	}
	cases := []struct {
		f float32
		h uint16
	}{
		{1, 0x3f80},
		{-1, 0xbf80},
		{1 + 0x1p-8, 0x3f80},           // tie, 0x3f80 even
		{1 + 3*0x1p-8, 0x3f82},         // tie, 0x3f81 odd
		{1 + 0x1p-8 + 0x1p-20, 0x3f81}, // just above the tie
		{math.MaxFloat32, 0x7f80},      // above the midpoint to 2^128: inf
		{float32(math.Inf(1)), 0x7f80},
		{0x1p-133, 0x0001}, // subnormal kept
	}
	for _, c := range cases {
		assert.Equal(t, c.h, F32ToBF16(c.f), "F32ToBF16(%g)", c.f)
	}
	assert.Equal(t, float32(1), BF16ToF32(0x3f80))
	assert.Equal(t, float32(-2.5), BF16ToF32(0xc020))
	n := F32ToBF16(math.Float32frombits(0x7f800001))
	assert.True(t, n&0x7f80 == 0x7f80 && n&0x7f != 0, "nan -> %#04x", n)
}
