package avx2

import (
	"math"
	"math/rand/v2"
	"testing"
)

// checkElementwise holds SumSq64, ScaleMul and Add on x, w to their
// definitions: the sum of squares within 1e-12 of a float64 loop's (each
// square is exact; only the order of the float64 adds differs), the
// products and sums bit for bit (NaN for NaN).
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
}

func TestElementwise(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, n := range []int{0, 1, 7, 8, 9, 15, 16, 17, 33, 100, 4096, 4099} {
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
