package avx2

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestGatherQ4x8: the packed mat-vec, on every path, against the float64
// reference of the unpacked rows.
func TestGatherQ4x8(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	for _, cols := range []int{32, 96, 4096} {
		for _, nrows := range []int{8, 24} {
			w := randMatrix(r, kQ4, nrows, cols, 0)
			x := randVec(r, cols)
			xq := make([]byte, cols/32*34)
			QuantizeQ8(xq, x)
			p := PackQ4x8(w, cols)
			t.Run(fmt.Sprintf("cols%d/rows%d", cols, nrows), func(t *testing.T) {
				forPaths(t, func(t *testing.T) {
					out := make([]float32, nrows)
					GatherQ4x8(out, p, cols, xq)
					checkGatherRef(t, kQ4, out, w, cols, nil, refQ8(xq))
				})
			})
		}
	}
}

// BenchmarkGatherQ4x8 holds the packed mat-vec beside the row kernel
// (GatherQ4_0 over the same rows), hot (160 rows, 369 KB, in L2) and over all rows of
// the benchmark's 11008x4096 matrices.
func BenchmarkGatherQ4x8(b *testing.B) {
	r := rand.New(rand.NewPCG(23, 23))
	x := randVec(r, benchCols)
	xq := make([]byte, benchCols/32*34)
	QuantizeQ8(xq, x)
	hot := randMatrix(r, kQ4, 160, benchCols, 0)
	hotP := PackQ4x8(hot, benchCols)
	m := benchMatrix(kQ4)
	packed := make([][]byte, len(m.layers))
	for i, l := range m.layers {
		packed[i] = PackQ4x8(l[:benchRows/8*8*kQ4.rowBytes(benchCols)], benchCols)
	}
	out := make([]float32, benchRows)
	for _, c := range []struct {
		name string
		n    int
		run  func(i int)
	}{
		{"hot/rows", 160, func(i int) { GatherQ4_0(out[:160], hot, benchCols, nil, xq) }},
		{"hot/packed", 160, func(i int) { GatherQ4x8(out[:160], hotP, benchCols, xq) }},
		{"all/rows", benchRows, func(i int) { GatherQ4_0(out, m.layers[i%len(m.layers)], benchCols, nil, xq) }},
		{"all/packed", benchRows / 8 * 8, func(i int) {
			GatherQ4x8(out[:benchRows/8*8], packed[i%len(packed)], benchCols, xq)
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(c.n * kQ4.rowBytes(benchCols)))
			i := 0
			for b.Loop() {
				c.run(i)
				i++
			}
		})
	}
}

// FuzzGatherQ4x8: the packed mat-vec on fuzzed q4_0 weights (eight or
// sixteen rows, 32 to 320 columns), every path against the reference.
func FuzzGatherQ4x8(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, kb byte, c uint16, nr uint8, sel, data []byte) {
		_, cols, w, _, nrows := fuzzShape(kb|byte(kQ4), c, nr, nil, data)
		n := nrows / 8 * 8
		if n == 0 {
			return
		}
		w = w[:n*kQ4.rowBytes(cols)]
		r := rand.New(rand.NewPCG(uint64(c), uint64(nr)))
		xq := make([]byte, cols/32*34)
		QuantizeQ8(xq, randVec(r, cols))
		p := PackQ4x8(w, cols)
		forPaths(t, func(t *testing.T) {
			out := make([]float32, n)
			GatherQ4x8(out, p, cols, xq)
			checkGatherRef(t, kQ4, out, w, cols, nil, refQ8(xq))
		})
	})
}
