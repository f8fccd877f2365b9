package avx2

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// The strided f32 gather and axpy (attention's view of the KV cache)
// against float64 sums, on every path, with column counts that leave
// tails and strides wider than the rows.
func TestStrided(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	for _, cols := range []int{0, 1, 7, 8, 31, 128, 131} {
		for _, extra := range []int{0, 5, 4096} {
			for _, n := range []int{0, 1, 9, 40} {
				t.Run(fmt.Sprintf("cols%d/stride%d/n%d", cols, cols+extra, n), func(t *testing.T) {
					forPaths(t, func(t *testing.T) { checkStridedRef(t, r, cols, cols+extra, n) })
				})
			}
		}
	}
}

func FuzzStrided(f *testing.F) {
	f.Add(uint16(131), uint16(5), uint8(9), uint64(1))
	f.Fuzz(func(t *testing.T, cols, extra uint16, n uint8, seed uint64) {
		cols, extra = cols%600, extra%600
		for _, p := range paths() {
			onPath(p, func() { checkStridedRef(t, rand.New(rand.NewPCG(seed, 1)), int(cols), int(cols+extra), int(n)) })
		}
	})
}

// checkStridedRef runs both strided kernels on random data and holds them
// to float64 sums.
func checkStridedRef(t *testing.T, r *rand.Rand, cols, stride, n int) {
	t.Helper()
	w := randVec(r, max(0, (n-1)*stride+cols))
	x, coef, y0 := randVec(r, cols), randVec(r, n), randVec(r, cols)
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(math.NaN()) // must be overwritten
	}
	GatherF32Strided(out, w, stride, cols, x)
	for k := range n {
		var s, mag float64
		for j := range cols {
			p := float64(w[k*stride+j]) * float64(x[j])
			s, mag = s+p, mag+math.Abs(p)
		}
		if !(math.Abs(float64(out[k])-s) <= 1e-5*mag+1e-30) {
			t.Fatalf("gather row %d: got %g, want %g", k, out[k], s)
		}
	}
	y := append([]float32(nil), y0...)
	AxpyF32Strided(y, w, stride, coef)
	for j := range cols {
		s, mag := float64(y0[j]), math.Abs(float64(y0[j]))
		for k := range n {
			p := float64(coef[k]) * float64(w[k*stride+j])
			s, mag = s+p, mag+math.Abs(p)
		}
		if !(math.Abs(float64(y[j])-s) <= 1e-5*mag+1e-30) {
			t.Fatalf("axpy y[%d]: got %g, want %g", j, y[j], s)
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
