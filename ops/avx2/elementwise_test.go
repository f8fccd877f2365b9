package avx2

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// checkElementwise holds SumSq64, ScaleMul, Add, the rotations and Above on x, w
// to their definitions: the sum of squares within 1e-12 of a float64
// loop's (each square is exact; only the order of the float64 adds
// differs), the products and sums bit for bit (NaN for NaN). The
// rotations turn x's pairs by angles whose cosines are w and sines x
// backwards, products rounded before the sums as float32() makes Go do.
func checkElementwise(t *testing.T, p string, x, w []float32, s float32) {
	t.Helper()
	var want float64
	for _, v := range x {
		want += float64(v) * float64(v)
	}
	got := SumSq64(x)
	switch {
	case math.IsNaN(want) || math.IsInf(want, 0):
		if got != want && !(math.IsNaN(got) && math.IsNaN(want)) {
			t.Fatalf("%s n=%d: SumSq64 = %g, want %g", p, len(x), got, want)
		}
	case math.Abs(got-want) > 1e-12*want:
		t.Fatalf("%s n=%d: SumSq64 = %g, want %g", p, len(x), got, want)
	}
	out := make([]float32, len(x))
	same := func(op string, i int, got, want float32) {
		if got != want && !(got != got && want != want) {
			t.Fatalf("%s n=%d: %s[%d] = %g, want %g", p, len(x), op, i, got, want)
		}
	}
	ScaleMul(out, x, w, s)
	for i := range x {
		same("ScaleMul", i, out[i], x[i]*s*w[i])
	}
	Add(out, x, w)
	for i := range x {
		same("Add", i, out[i], x[i]+w[i])
	}
	c, sn := w, make([]float32, len(x))
	for i, v := range x {
		sn[len(x)-1-i] = v
	}
	rot := func(x0, x1, c, s float32) (float32, float32) {
		return float32(x0*c) - float32(x1*s), float32(x0*s) + float32(x1*c)
	}
	n := len(x) / 2
	copy(out, x)
	RotatePairs(out[:2*n], c, sn)
	for i := range n {
		w0, w1 := rot(x[2*i], x[2*i+1], c[i], sn[i])
		same("RotatePairs", 2*i, out[2*i], w0)
		same("RotatePairs", 2*i+1, out[2*i+1], w1)
	}
	copy(out, x)
	RotateHalves(out[:n], out[n:2*n], c, sn)
	for i := range n {
		w0, w1 := rot(x[i], x[n+i], c[i], sn[i])
		same("RotateHalves", i, out[i], w0)
		same("RotateHalves", n+i, out[n+i], w1)
	}
	// Above, after an entry already in dst, with the cut s and with a cut
	// that some values equal (not above it).
	cuts := []float32{s}
	if len(x) > 0 {
		cuts = append(cuts, x[len(x)/2])
	}
	for _, cut := range cuts {
		want := []int32{-1}
		for i, v := range x {
			if v > cut {
				want = append(want, int32(i))
			}
		}
		got := Above([]int32{-1}, x, cut)
		if !slices.Equal(got, want) {
			t.Fatalf("%s n=%d: Above(%g) = %v, want %v", p, len(x), cut, got, want)
		}
	}
}

func TestElementwise(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, n := range []int{0, 1, 7, 8, 9, 15, 16, 17, 24, 33, 100, 4096, 4099, 11008} {
		x, w := randVec(r, n), randVec(r, n)
		for _, p := range paths() {
			onPath(p, func() { checkElementwise(t, p, x, w, float32(r.NormFloat64())) })
		}
	}
}

// FuzzElementwise: any float32 inputs, NaN, Inf and subnormals included.
func FuzzElementwise(f *testing.F) {
	seed := make([]byte, 4*41)
	for i := range seed {
		seed[i] = byte(i*29 + 3)
	}
	f.Add(seed, float32(0.75))
	f.Fuzz(func(t *testing.T, data []byte, s float32) {
		v := fuzzFloats(data)
		x, w := v[:len(v)/2], v[len(v)/2:2*(len(v)/2)]
		for _, p := range paths() {
			onPath(p, func() { checkElementwise(t, p, x, w, s) })
		}
	})
}

// BenchmarkRotate: a 7B decode step's q or k (4096 values, rope's pairs)
// rotated on each path; the angles are true ones, so the values stay put.
func BenchmarkRotate(b *testing.B) {
	r := rand.New(rand.NewPCG(9, 9))
	v, c, s := randVec(r, 4096), make([]float32, 2048), make([]float32, 2048)
	for i := range c {
		s64, c64 := math.Sincos(float64(i))
		c[i], s[i] = float32(c64), float32(s64)
	}
	withPath(b, 4*4096, func(b *testing.B) {
		for b.Loop() {
			RotatePairs(v, c, s)
		}
	})
}

// BenchmarkAbove: a 7B layer's 11008 predictor scores, a fifth of them above
// the cut at random (what decode picks from), on each path.
func BenchmarkAbove(b *testing.B) {
	r := rand.New(rand.NewPCG(10, 10))
	x := make([]float32, 11008)
	for i := range x {
		x[i] = r.Float32()
	}
	dst := make([]int32, 0, len(x))
	withPath(b, 4*int64(len(x)), func(b *testing.B) {
		for b.Loop() {
			dst = Above(dst[:0], x, 0.8)
		}
	})
}
