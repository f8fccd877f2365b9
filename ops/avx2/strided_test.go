package avx2

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The strided f32 gather and axpy (attention's view of the KV cache)
// against float64 sums, on every path, with column counts that leave
// tails and strides wider than the rows, and row counts that leave a last
// group of four short (the AVX-512 gather then repeats the last four).
func TestStrided(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	for _, cols := range []int{0, 1, 7, 8, 16, 31, 48, 64, 128, 131} {
		for _, extra := range []int{0, 5, 4096} {
			for _, n := range []int{0, 1, 4, 6, 9, 40} {
				t.Run(fmt.Sprintf("cols%d/stride%d/n%d", cols, cols+extra, n), func(t *testing.T) {
					forPaths(t, func(t *testing.T) {
						checkStridedRef(t, r, cols, cols+extra, n, false)
						checkStridedRef(t, r, cols, cols+extra, n, true)
						checkStrided4Ref(t, r, cols, cols+extra, n, false)
						checkStrided4Ref(t, r, cols, cols+extra, n, true)
					})
				})
			}
		}
	}
}

func FuzzStrided(f *testing.F) {
	f.Add(uint16(131), uint16(5), uint8(9), uint64(1), false)
	f.Fuzz(func(t *testing.T, cols, extra uint16, n uint8, seed uint64, f16 bool) {
		cols, extra = cols%600, extra%600
		for _, p := range paths() {
			onPath(p, func() {
				r := rand.New(rand.NewPCG(seed, 1))
				checkStridedRef(t, r, int(cols), int(cols+extra), int(n), f16)
				checkStrided4Ref(t, r, int(cols), int(cols+extra), int(n), f16)
			})
		}
	})
}

// checkStridedRef runs both strided kernels, over f32 or f16 values, on
// random data and holds them to float64 sums.
func checkStridedRef(t *testing.T, r *rand.Rand, cols, stride, n int, f16 bool) {
	t.Helper()
	w, w16, at := randRows(r, max(0, (n-1)*stride+cols), f16)
	x, coef, y0 := randVec(r, cols), randVec(r, n), randVec(r, cols)
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(math.NaN()) // must be overwritten
	}
	if f16 {
		GatherF16Strided(out, w16, stride, cols, x)
	} else {
		GatherF32Strided(out, w, stride, cols, x)
	}
	for k := range n {
		var s, mag float64
		for j := range cols {
			p := at(k*stride+j) * float64(x[j])
			s, mag = s+p, mag+math.Abs(p)
		}
		if !(math.Abs(float64(out[k])-s) <= 1e-5*mag+1e-30) {
			t.Fatalf("f16=%v gather row %d: got %g, want %g", f16, k, out[k], s)
		}
	}
	y := append([]float32(nil), y0...)
	if f16 {
		AxpyF16Strided(y, w16, stride, coef)
	} else {
		AxpyF32Strided(y, w, stride, coef)
	}
	for j := range cols {
		s, mag := float64(y0[j]), math.Abs(float64(y0[j]))
		for k := range n {
			p := float64(coef[k]) * at(k*stride+j)
			s, mag = s+p, mag+math.Abs(p)
		}
		if !(math.Abs(float64(y[j])-s) <= 1e-5*mag+1e-30) {
			t.Fatalf("f16=%v axpy y[%d]: got %g, want %g", f16, j, y[j], s)
		}
	}
}

// checkStrided4Ref holds the four-vector forms, which a prompt's rows use
// four at a time, to float64 sums, over f32 or f16 values.
func checkStrided4Ref(t *testing.T, r *rand.Rand, cols, stride, n int, f16 bool) {
	t.Helper()
	w, w16, at := randRows(r, max(0, (n-1)*stride+cols), f16)
	x, coef, y0 := randVec(r, 4*cols), randVec(r, 4*n), randVec(r, 4*cols)
	out := make([]float32, 4*n)
	for i := range out {
		out[i] = float32(math.NaN()) // must be overwritten
	}
	y := append([]float32(nil), y0...)
	if f16 {
		GatherF16Strided4(out, w16, stride, cols, x)
		AxpyF16Strided4(y, w16, stride, coef)
	} else {
		GatherF32Strided4(out, w, stride, cols, x)
		AxpyF32Strided4(y, w, stride, coef)
	}
	for q := range 4 {
		for k := range n {
			var s, mag float64
			for j := range cols {
				p := at(k*stride+j) * float64(x[q*cols+j])
				s, mag = s+p, mag+math.Abs(p)
			}
			if !(math.Abs(float64(out[q*n+k])-s) <= 1e-5*mag+1e-30) {
				t.Fatalf("f16=%v gather4 x%d row %d: got %g, want %g", f16, q, k, out[q*n+k], s)
			}
		}
		for j := range cols {
			s, mag := float64(y0[q*cols+j]), math.Abs(float64(y0[q*cols+j]))
			for k := range n {
				p := float64(coef[q*n+k]) * at(k*stride+j)
				s, mag = s+p, mag+math.Abs(p)
			}
			if !(math.Abs(float64(y[q*cols+j])-s) <= 1e-5*mag+1e-30) {
				t.Fatalf("f16=%v axpy4 y%d[%d]: got %g, want %g", f16, q, j, y[q*cols+j], s)
			}
		}
	}
}

// EncodeF16 must give the binary16 value nearest each input, ties to the
// even one, ±inf past the largest finite half, NaN for NaN.
func TestEncodeF16(t *testing.T) {
	r := rand.New(rand.NewPCG(10, 10))
	var x []float32
	for range 3000 {
		// Magnitudes from below the smallest subnormal half to past the largest.
		x = append(x, float32(r.NormFloat64()*math.Ldexp(1, r.IntN(44)-28)))
	}
	for h := range 1 << 15 {
		// Every half and the midpoints between neighbours: the ties.
		v := refHalf(uint16(h))
		if !math.IsInf(v, 0) && !math.IsNaN(v) {
			next := refHalf(uint16(h + 1))
			x = append(x, float32(v), -float32(v))
			if !math.IsInf(next, 0) && !math.IsNaN(next) {
				x = append(x, float32((v+next)/2))
			}
		}
	}
	x = append(x, 65504, 65519.99, 65520, 1e9, float32(math.Inf(-1)), float32(math.NaN()), 0, float32(math.Copysign(0, -1)))
	for _, n := range []int{len(x), 7, 1, 0} {
		forPaths(t, func(t *testing.T) {
			got := make([]uint16, n)
			EncodeF16(got, x[:n])
			for i, h := range got {
				checkHalf(t, x[i], h)
			}
		})
	}
}

func checkHalf(t *testing.T, x float32, h uint16) {
	t.Helper()
	v, xf := refHalf(h), float64(x)
	switch {
	case math.IsNaN(xf):
		if !math.IsNaN(v) {
			t.Fatalf("NaN encoded as %#04x", h)
		}
		return
	case math.Abs(xf) >= 65520:
		if !math.IsInf(v, int(math.Copysign(1, xf))) {
			t.Fatalf("%g encoded as %#04x, want inf", x, h)
		}
		return
	case math.Signbit(v) != math.Signbit(xf):
		t.Fatalf("%g encoded as %#04x: sign", x, h)
	}
	d := math.Abs(v - xf)
	for _, nb := range []uint16{h - 1, h + 1} {
		if nb&0x7fff >= 0x7c00 || (nb^h)&0x8000 != 0 {
			continue // past inf, or across zero
		}
		dn := math.Abs(refHalf(nb) - xf)
		if dn < d || (dn == d && h&1 == 1) {
			t.Fatalf("%g encoded as %#04x (%g), but %#04x (%g) is nearer or the even tie", x, h, v, nb, refHalf(nb))
		}
	}
}

func TestStridedMisuse(t *testing.T) {
	w := make([]float32, 100)
	for want, f := range map[string]func(){
		"avx2.GatherF32Strided: cols=10, stride=8":           func() { GatherF32Strided(make([]float32, 2), w, 8, 10, make([]float32, 10)) },
		"avx2.GatherF32Strided: 3 rows of 8, 50 apart":       func() { GatherF32Strided(make([]float32, 3), w, 50, 8, make([]float32, 8)) },
		"avx2.GatherF32Strided: x has length 7, want cols=8": func() { GatherF32Strided(make([]float32, 1), w, 8, 8, make([]float32, 7)) },
		"avx2.AxpyF32Strided: 2 rows of 8, 95 apart":         func() { AxpyF32Strided(make([]float32, 8), w, 95, make([]float32, 2)) },
	} {
		func() {
			defer func() {
				if msg := fmt.Sprint(recover()); !strings.HasPrefix(msg, want) {
					t.Errorf("panic %q, want one starting %q", msg, want)
				}
			}()
			f()
		}()
	}
}

// ExpSum against e^(x-m) in float64 (x-m in float32), on every path, at lengths around the
// sixteen-lane step, over softmax's range of inputs and its edges.
func TestExpSum(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	for _, n := range []int{1, 7, 15, 16, 17, 31, 33, 100, 1000} {
		x0 := make([]float32, n)
		for i := range x0 {
			x0[i] = float32(-110 * r.Float64())
		}
		x0[0] = 0
		if n > 3 {
			x0[1], x0[2], x0[3] = float32(math.Inf(-1)), -87.5, float32(-1e-8)
		}
		forPaths(t, func(t *testing.T) {
			x := append([]float32(nil), x0...)
			m := float32(0.25)
			got := ExpSum(x, m)
			var want float64
			for i, v := range x0 {
				e := math.Exp(float64(v - m)) // x - m in float32, as softmax takes it
				want += e
				if e < 1e-30 {
					require.Less(t, float64(x[i]), 1e-30, "n=%d x=%g", n, v)
					continue
				}
				require.InEpsilon(t, e, float64(x[i]), 3e-7, "n=%d x=%g", n, v)
			}
			require.InEpsilon(t, want, float64(got), 1e-6, "n=%d", n)
		})
	}
	x := []float32{float32(math.NaN()), 0}
	ExpSum(x, 0)
	require.True(t, math.IsNaN(float64(x[0])), "NaN in, NaN out")
}

// randRows makes size random values in f32 (w) or, with f16, in f16
// (w16), and at reads value i as the kernels see it.
func randRows(r *rand.Rand, size int, f16 bool) (w []float32, w16 []uint16, at func(int) float64) {
	w, w16 = randVec(r, size), make([]uint16, size)
	at = func(i int) float64 { return float64(w[i]) }
	if f16 {
		for i := range w16 {
			w16[i] = randHalf(r)
		}
		at = func(i int) float64 { return refHalf(w16[i]) }
	}
	return w, w16, at
}
