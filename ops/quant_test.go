package ops

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDequantizeQ8_0Hand(t *testing.T) {
	blk := make([]byte, 34)
	blk[0], blk[1] = 0x00, 0x38 // d = 0.5
	qs := []int8{0, 1, -1, 127, -128, 2, -3, 64}
	for j, q := range qs {
		blk[2+j] = byte(q)
	}
	want := make([]float32, 32)
	copy(want, []float32{0, 0.5, -0.5, 63.5, -64, 1, -1.5, 32})
	got := make([]float32, 32)
	require.NoError(t, Dequantize(Q8_0, got, blk))
	assert.Equal(t, want, got)
}

func TestDequantizeQ4_0Hand(t *testing.T) {
	blk := make([]byte, 18)
	blk[0], blk[1] = 0x00, 0x40 // d = 2
	for j := range 16 {
		blk[2+j] = 0x88 // q = 8 in both nibbles: value 0
	}
	blk[2] = 0xf0  // element 0: q=0 -> -16; element 16: q=15 -> 14
	blk[3] = 0x19  // element 1: q=9 -> 2;   element 17: q=1 -> -14
	blk[17] = 0x7a // element 15: q=10 -> 4; element 31: q=7 -> -2
	want := make([]float32, 32)
	want[0], want[16] = -16, 14
	want[1], want[17] = 2, -14
	want[15], want[31] = 4, -2
	got := make([]float32, 32)
	require.NoError(t, Dequantize(Q4_0, got, blk))
	assert.Equal(t, want, got)
}

func TestQuantizeQ8_0Hand(t *testing.T) {
	x := make([]float32, 32)
	copy(x, []float32{127, -63.5, 0.5, -0.5, 1.49, -127, 2.5})
	got := make([]byte, 34)
	require.NoError(t, Quantize(Q8_0, got, x))
	want := make([]byte, 34)
	want[0], want[1] = 0x00, 0x3c // d = amax/127 = 1
	// roundf sends halves away from zero.
	for j, q := range []int8{127, -64, 1, -1, 1, -127, 3} {
		want[2+j] = byte(q)
	}
	assert.Equal(t, want, got)
}

func TestQuantizeQ4_0Sign(t *testing.T) {
	// The largest magnitude is negative: d = -16/-8 = 2 and it maps to q=0.
	x := make([]float32, 32)
	copy(x, []float32{-16, 14, 15.9, 1, -1, 3.1})
	x[16], x[17] = -15, 0.99
	got := make([]byte, 18)
	require.NoError(t, Quantize(Q4_0, got, x))
	want := make([]byte, 18)
	want[0], want[1] = 0x00, 0x40
	// q = min(15, trunc(x/2 + 8.5)); low nibble j, high nibble j+16.
	lo := []byte{0, 15, 15, 9, 8, 10}
	hi := []byte{1, 8} // -7.5+8.5 = 1; 0.495+8.5 = 8.995 truncates to 8
	for j := range 16 {
		l, h := byte(8), byte(8)
		if j < len(lo) {
			l = lo[j]
		}
		if j < len(hi) {
			h = hi[j]
		}
		want[2+j] = l | h<<4
	}
	assert.Equal(t, want, got)

	// Largest magnitude positive: d = -2, and it maps to q=0 too.
	for i := range x {
		x[i] = -x[i]
	}
	require.NoError(t, Quantize(Q4_0, got, x))
	want[0], want[1] = 0x00, 0xc0
	assert.Equal(t, want, got)
	deq := make([]float32, 32)
	require.NoError(t, Dequantize(Q4_0, deq, got))
	assert.Equal(t, float32(16), deq[0])
	assert.Equal(t, float32(-14), deq[1]) // q=15: (15-8)*-2
}

func TestQuantizeZeroBlock(t *testing.T) {
	x := make([]float32, 64)
	// q4_0's d is 0/-8 = -0 (f16 0x8000), as ggml's reference writes it.
	for _, c := range []struct {
		t    DType
		dHi  byte
		fill byte
	}{{Q8_0, 0, 0}, {Q4_0, 0x80, 0x88}} {
		n, _ := c.t.RowBytes(64)
		b := make([]byte, n)
		require.NoError(t, Quantize(c.t, b, x))
		for i, v := range b {
			switch i % c.t.BlockBytes() {
			case 0:
				assert.Zero(t, v, "%s byte %d", c.t, i)
			case 1:
				assert.Equal(t, c.dHi, v, "%s byte %d", c.t, i)
			default:
				assert.Equal(t, c.fill, v, "%s byte %d", c.t, i)
			}
		}
		y := []float32{9, 9}
		y = append(y, make([]float32, 62)...)
		require.NoError(t, Dequantize(c.t, y, b))
		assert.Equal(t, x, y)
	}
}

// randBlocks draws values whose scale varies a lot between blocks.
func randBlocks(r *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for b := 0; b < n; b += 32 {
		s := math.Pow(10, r.Float64()*6-3)
		for j := b; j < min(n, b+32); j++ {
			x[j] = float32(r.NormFloat64() * s)
		}
	}
	return x
}

func TestQuantizeRoundTripBounds(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const n = 32 * 200
	x := randBlocks(r, n)
	for _, dt := range []DType{Q8_0, Q4_0} {
		nb, _ := dt.RowBytes(n)
		b := make([]byte, nb)
		require.NoError(t, Quantize(dt, b, x))
		y := make([]float32, n)
		require.NoError(t, Dequantize(dt, y, b))
		for blk := 0; blk < n/32; blk++ {
			xs := x[blk*32 : blk*32+32]
			var amax, vmax float64
			for _, v := range xs {
				if math.Abs(float64(v)) > amax {
					amax, vmax = math.Abs(float64(v)), float64(v)
				}
			}
			// The quantizer divides by the exact d; the file keeps d in f16,
			// which moves a value by at most |q|·|d-d16|.
			var d, qmax float64
			if dt == Q8_0 {
				d, qmax = amax/127, 127
			} else {
				d, qmax = math.Abs(vmax/8), 8
			}
			d16 := math.Abs(float64(F16ToF32(uint16(b[blk*dt.BlockBytes()]) | uint16(b[blk*dt.BlockBytes()+1])<<8)))
			step := 0.5 * d // q8_0 rounds
			if dt == Q4_0 {
				step = d // q4_0 truncates after +0.5, and clips +8 to +7
			}
			bound := step + qmax*math.Abs(d-d16) + 1e-6*d
			for j, v := range xs {
				e := math.Abs(float64(v) - float64(y[blk*32+j]))
				require.LessOrEqual(t, e, bound, "%s block %d elem %d: %g -> %g", dt, blk, j, v, y[blk*32+j])
			}
		}
	}
}

// With d exactly representable in f16, the bounds are the plain step sizes.
func TestQuantizeExactScaleBounds(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	x := make([]float32, 32*50)
	for i := range x {
		x[i] = float32(r.Float64()*2-1) * 127 * 0.25
	}
	for b := 0; b < len(x); b += 32 {
		x[b+r.IntN(32)] = 127 * 0.25 // amax, and the q4_0 max is positive
	}
	for _, dt := range []DType{Q8_0, Q4_0} {
		nb, _ := dt.RowBytes(len(x))
		b := make([]byte, nb)
		require.NoError(t, Quantize(dt, b, x))
		y := make([]float32, len(x))
		require.NoError(t, Dequantize(dt, y, b))
		d := 0.25
		if dt == Q4_0 {
			d = 127 * 0.25 / 8
		}
		for i := range x {
			bound := d / 2
			if dt == Q4_0 {
				bound = d
			}
			require.LessOrEqual(t, math.Abs(float64(x[i]-y[i])), bound*(1+1e-6), "%s elem %d", dt, i)
		}
	}
}

func TestQuantizePlainTypes(t *testing.T) {
	x := []float32{1, -2.5, 65504, 1e-3, 3.14159}
	for _, c := range []struct {
		t   DType
		tol float64 // relative
	}{{F32, 0}, {F16, 0x1p-11}, {BF16, 0x1p-8}} {
		nb, _ := c.t.RowBytes(len(x))
		b := make([]byte, nb)
		require.NoError(t, Quantize(c.t, b, x))
		y := make([]float32, len(x))
		require.NoError(t, Dequantize(c.t, y, b))
		for i := range x {
			assert.InDelta(t, x[i], y[i], c.tol*math.Abs(float64(x[i])), "%s %g", c.t, x[i])
		}
	}
	b := make([]byte, 4)
	require.NoError(t, Quantize(F32, b, []float32{1}))
	assert.Equal(t, []byte{0, 0, 0x80, 0x3f}, b) // little-endian
	require.NoError(t, Quantize(F16, b, []float32{1, -2}))
	assert.Equal(t, []byte{0, 0x3c, 0, 0xc0}, b)
}

func TestQuantizeErrors(t *testing.T) {
	assert.ErrorContains(t, Quantize(Q8_0, make([]byte, 34), make([]float32, 31)), "q8_0")
	assert.ErrorContains(t, Quantize(Q8_0, make([]byte, 33), make([]float32, 32)), "need 34 bytes")
	assert.ErrorContains(t, Quantize(Q4_1, make([]byte, 20), make([]float32, 32)), "q4_1")
	assert.ErrorContains(t, Dequantize(Q4_0, make([]float32, 32), make([]byte, 17)), "need 18 bytes")
	assert.ErrorContains(t, Dequantize(I32, make([]float32, 1), make([]byte, 4)), "i32")
	assert.ErrorContains(t, Dequantize(DType(99), make([]float32, 1), make([]byte, 4)), "dtype(99)")
}
