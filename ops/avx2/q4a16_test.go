package avx2

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// checkAxpyQ4x16 holds AxpyQ4x16 over chunks c0..c1 of packed p (PackQ4Axpy
// of q4_0 rows w) to the float64 sum from w's own rows, within what
// rounding each sixteen rows' coef·d to int8 allows (half a scale per row,
// the scale being the group's largest |coef·d| over 127, taken here from
// the rows) and float32's rounding once per group.
func checkAxpyQ4x16(t *testing.T, w, p []byte, cols, c0, c1 int, coef, y0 []float32) {
	t.Helper()
	n, rb := len(coef), kQ4.rowBytes(cols)
	lo, hi := 256*c0, min(256*c1, cols)
	got := append([]float32(nil), y0[lo:hi]...)
	AxpyQ4x16(got, p[c0*n/16*a16Rec:c1*n/16*a16Rec], coef)
	want, mag, allow := make([]float64, cols), make([]float64, cols), make([]float64, cols)
	for j, v := range y0 {
		want[j], mag[j] = float64(v), math.Abs(float64(v))
	}
	for g := 0; g < n; g += 16 {
		for b := range cols / 32 {
			var s float64
			for r := g; r < g+16; r++ {
				s = max(s, math.Abs(float64(coef[r])*refHalf(le16(w[r*rb+18*b:]))))
			}
			s /= 127
			for r := g; r < g+16; r++ {
				row := refRow(kQ4, w[r*rb:][:rb], cols)
				d := refHalf(le16(w[r*rb+18*b:]))
				for j := 32 * b; j < 32*b+32; j++ {
					v := float64(coef[r]) * row[j]
					want[j] += v
					mag[j] += math.Abs(v)
					allow[j] += (0.5*s + 1e-6*s) * math.Abs(row[j]/d)
				}
			}
		}
	}
	for j := lo; j < hi; j++ {
		if math.IsNaN(want[j]) || math.IsInf(want[j], 0) || mag[j] > 1e30 || math.IsNaN(allow[j]) {
			continue // a fuzzed row's infinite or NaN d
		}
		tol := allow[j] + 6e-8*float64(n/16+1)*(mag[j]+allow[j]) + 1e-30
		if d := math.Abs(float64(got[j-lo]) - want[j]); !(d <= tol) {
			t.Fatalf("cols %d, %d rows, chunks %d..%d: y[%d] = %g, want %g (tol %g)", cols, n, c0, c1, j, got[j-lo], want[j], tol)
		}
	}
}

func TestAxpyQ4x16(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 31))
	// One block; a chunk and a part of one (544); four runs of one chunk,
	// a fifth alone and three blocks (1376); four runs of four (4096).
	for _, cols := range []int{32, 64, 544, 1376, 4096} {
		for _, n := range []int{16, 32, 48} {
			w := randMatrix(r, kQ4, n, cols, 1)
			p := PackQ4Axpy(w, cols)
			coef := randVec(r, n)
			if n >= 32 {
				// A group of zeros (its scale falls back to the tiny
				// one) and one with a large coefficient beside small ones.
				clear(coef[:16])
				coef[19] = 300
			}
			y0 := randVec(r, cols)
			nc := (cols/32 + 7) / 8
			t.Run(fmt.Sprintf("cols%d/n%d", cols, n), func(t *testing.T) {
				forPaths(t, func(t *testing.T) {
					checkAxpyQ4x16(t, w, p, cols, 0, nc, coef, y0)
					if nc > 2 {
						checkAxpyQ4x16(t, w, p, cols, 1, nc-1, coef, y0)
					}
				})
			})
		}
	}
}

// TestAxpyQ4x16Model holds the kernel to its Go model (the portable path),
// which makes the same int8 coefficients and integer sums: they differ by
// the model's second rounding of each multiply-add, an ulp at most.
func TestAxpyQ4x16Model(t *testing.T) {
	if !hasAVX2 {
		t.Skip("the portable path is the model; TestAxpyQ4x16 holds it to the reference")
	}
	r := rand.New(rand.NewPCG(32, 32))
	const cols, n = 1024, 64
	w := randMatrix(r, kQ4, n, cols, 0)
	p := PackQ4Axpy(w, cols)
	coef := randVec(r, n)
	y0 := randVec(r, cols)
	var got, want []float32
	onPath("avx2", func() {
		got = append([]float32(nil), y0...)
		AxpyQ4x16(got, p, coef)
	})
	want = append([]float32(nil), y0...)
	axpyQ4a16Go(want, p, coef)
	for j := range got {
		if d := math.Abs(float64(got[j] - want[j])); d > 2e-7*float64(n/16)*math.Abs(float64(want[j]))+1e-6 {
			t.Fatalf("y[%d]: kernel %g, model %g", j, got[j], want[j])
		}
	}
}

func FuzzAxpyQ4x16(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, kb byte, c uint16, nr uint8, sel, data []byte) {
		cols, w, n, r := fuzzGroups(kb, c, nr, data, 16)
		if n == 0 {
			return
		}
		coef := randVec(r, n)
		for i := range min(len(sel), n) {
			if sel[i]&1 == 0 {
				coef[i] = 0
			}
		}
		y0 := randVec(r, cols)
		p := PackQ4Axpy(w, cols)
		forPaths(t, func(t *testing.T) {
			checkAxpyQ4x16(t, w, p, cols, 0, (cols/32+7)/8, coef, y0)
		})
	})
}

// BenchmarkAxpyQ4x16 holds the packed axpy beside the row kernel
// (AxpyQ4_0, whose runs of rows take axpyQ4i16a on AVX2), hot (160 rows,
// in L2) and over all rows of the benchmark's 11008x4096 matrices, as a
// dense FFN's down projection reads them.
func BenchmarkAxpyQ4x16(b *testing.B) {
	r := rand.New(rand.NewPCG(33, 33))
	hot := randMatrix(r, kQ4, 160, benchCols, 0)
	hotP := PackQ4Axpy(hot, benchCols)
	m := benchMatrix(kQ4)
	nr, packed := packLayers(m, 16, PackQ4Axpy)
	coef := randVec(r, benchRows)
	y := make([]float32, benchCols)
	runQ4Cases(b, []q4Case{
		{"hot/rows", 160, func(i int) { AxpyQ4_0(y, hot, benchCols, Iota(160), coef[:160]) }},
		{"hot/packed", 160, func(i int) { AxpyQ4x16(y, hotP, coef[:160]) }},
		{"all/rows", nr, func(i int) { AxpyQ4_0(y, m.layers[i%len(m.layers)], benchCols, Iota(nr), coef[:nr]) }},
		{"all/packed", nr, func(i int) { AxpyQ4x16(y, packed[i%len(packed)], coef[:nr]) }},
	})
}

func BenchmarkPackQ4Axpy(b *testing.B) {
	r := rand.New(rand.NewPCG(34, 34))
	w := randMatrix(r, kQ4, benchRows, benchCols, 0) // an FFN's, beyond L2 and L3
	p := make([]byte, Q4AxpyBytes(benchRows, benchCols))
	b.SetBytes(int64(len(w)))
	for b.Loop() {
		PackQ4AxpyInto(p, w, benchCols)
	}
}
