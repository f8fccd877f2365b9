package avx2

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// checkActs runs GatherQ4_0Acts over T tokens and holds every output to the
// float64 reference of its token.
func checkActs(t *testing.T, w []byte, cols int, rows []int32, nrows, T int, r *rand.Rand) {
	t.Helper()
	x := randVec(r, T*cols)
	n := len(rows)
	if rows == nil {
		n = nrows
	}
	ldo := n + 3
	if rows == nil {
		ldo = n
	}
	var a Acts
	a.Set(x, cols, T)
	out := make([]float32, T*ldo)
	for i := range out {
		out[i] = float32(math.NaN())
	}
	GatherQ4_0Acts(out, ldo, w, rows, &a)
	rb := cols / 32 * 34
	for tt := 0; tt < T; tt++ {
		checkGatherRef(t, kQ4, out[tt*ldo:][:n], w, cols, rows, refQ8(a.Q[tt*rb:(tt+1)*rb]))
		for _, v := range out[tt*ldo+n : tt*ldo+ldo] {
			if !math.IsNaN(float64(v)) {
				t.Fatalf("token %d: wrote past its %d rows", tt, n)
			}
		}
	}
}

func TestGatherQ4Acts(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for _, cols := range []int{32, 96, 128, 4096, 4096 + 64, 4096 + 128} {
		nrows := 23
		if cols == 4096+128 {
			nrows = 250 // several row tiles of the 4x4 kernel
		}
		w := randMatrix(r, kQ4, nrows, cols, 1+r.IntN(3))
		for _, T := range []int{1, 2, 4, 5, 8, 9, 16, 21} {
			for name, rows := range rowSets(r, nrows) {
				t.Run(fmt.Sprintf("cols%d/T%d/%s", cols, T, name), func(t *testing.T) {
					forPaths(t, func(t *testing.T) { checkActs(t, w, cols, rows, nrows, T, rand.New(rand.NewPCG(uint64(T), 1))) })
				})
			}
		}
	}
}

func TestGatherQ8F32(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, cols := range quantCols {
		const nrows = 37
		w := randMatrix(r, kQ8, nrows, cols, 1+r.IntN(3))
		x := randVec(r, cols)
		for name, rows := range rowSets(r, nrows) {
			t.Run(fmt.Sprintf("cols%d/%s", cols, name), func(t *testing.T) {
				forPaths(t, func(t *testing.T) { checkQ8F32(t, w, cols, rows, nrows, x) })
			})
		}
	}
}

func checkQ8F32(t *testing.T, w []byte, cols int, rows []int32, nrows int, x []float32) {
	t.Helper()
	n := len(rows)
	if rows == nil {
		n = nrows
	}
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(math.NaN())
	}
	GatherQ8_0F32(out, w, cols, rows, x)
	xr := make([]float64, len(x))
	for i, v := range x {
		xr[i] = float64(v)
	}
	// Unlike GatherQ8_0, x is not rounded: relTol of f32 sums suffices.
	checkGatherRef(t, kQ8, out, w, cols, rows, xr)
}

func FuzzGatherQ4Acts(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, kb byte, c uint16, nr uint8, sel, data []byte) {
		_, cols, w, rows, nrows := fuzzShape(byte(kQ4)|kb&^3, c, nr, sel, data)
		T := 1 + int(kb>>4)%9
		for _, p := range paths() {
			onPath(p, func() { checkActs(t, w, cols, rows, nrows, T, rand.New(rand.NewPCG(uint64(c), 3))) })
		}
	})
}

func FuzzGatherQ8F32(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, kb byte, c uint16, nr uint8, sel, data []byte) {
		_, cols, w, rows, nrows := fuzzShape(byte(kQ8)|kb&^3, c, nr, sel, data)
		x := randVec(rand.New(rand.NewPCG(uint64(c), 4)), cols)
		for _, p := range paths() {
			onPath(p, func() { checkQ8F32(t, w, cols, rows, nrows, x) })
		}
	})
}

// FuzzQuantizeQ8: every path writes the same bytes for finite input.
func FuzzQuantizeQ8(f *testing.F) {
	f.Add([]byte{0x00, 0x00, 0x00, 0x3f, 0xff, 0xff, 0x7f, 0x7f})
	f.Fuzz(func(t *testing.T, data []byte) {
		x := make([]float32, 64)
		for i := range x {
			if len(data) > 0 {
				x[i] = math.Float32frombits(uint32(data[(4*i)%len(data)]) | uint32(data[(4*i+1)%len(data)])<<8 | uint32(data[(4*i+2)%len(data)])<<16 | uint32(data[(4*i+3)%len(data)])<<24 ^ uint32(i))
			}
			if math.IsNaN(float64(x[i])) || math.IsInf(float64(x[i]), 0) {
				x[i] = 0
			}
		}
		var want []byte
		for _, p := range paths() {
			onPath(p, func() {
				q := make([]byte, 68)
				QuantizeQ8(q, x)
				if want == nil {
					want = q
				} else if string(q) != string(want) {
					t.Fatalf("%s path: %x, want %x (x %v)", p, q, want, x)
				}
			})
		}
	})
}
