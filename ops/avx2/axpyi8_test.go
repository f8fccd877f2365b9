package avx2

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// The AVX-512 q4_0 axpy quantizes, per sixteen rows (where a row's blocks
// come in sixteens) or eight and block, the products coef·d to int8 with one
// scale (axpyQ4i16, axpyQ4i8). These tests hold it to the float64 reference
// within the error that rounding allows, and to a Go model of the scheme
// within float32 rounding.

// i8Groups returns the sizes of the int8 groups AxpyQ4_0 makes of n rows
// of nblk blocks: on AVX-512 sixteens (with int16Rows, where a row's blocks
// come in sixteens), then eights; on AVX2 sixteens; the rows after them are
// summed one by one in float32. AVX2 takes only runs of neighbouring rows,
// unless i8Cached says the rows went to AxpyQ4_0Cached.
func i8Groups(ids []int32, nblk int) []int {
	n := len(ids)
	var g []int
	k := 0
	if !int8Axpy {
		return nil
	}
	if !AVX512 {
		if n == 0 || (!i8Cached && scattered(ids) != 0) {
			return nil
		}
		for ; k+16 <= n; k += 16 {
			g = append(g, 16)
		}
		return g
	}
	if int16Rows && nblk%16 == 0 {
		for ; k+16 <= n; k += 16 {
			g = append(g, 16)
		}
	}
	for ; k+8 <= n; k += 8 {
		g = append(g, 8)
	}
	return g
}

// i8Cached: the test is calling AxpyQ4_0Cached.
var i8Cached bool

// i8Group returns, for rows k..k+g-1 of ids and block b, the float32
// products c = coef·d and the scale s and int8 coefficients q the scheme
// derives.
func i8Group(w []byte, rb int, ids []int32, coef []float32, k, g, b int) (s float32, q []int32, c []float32) {
	var m float32
	c, q = make([]float32, g), make([]int32, g)
	for r := range g {
		d := float32(refHalf(le16(w[int(ids[k+r])*rb+18*b:])))
		c[r] = coef[k+r] * d
		m = max(m, float32(math.Abs(float64(c[r]))))
	}
	m = max(m, 1e-30)
	inv := float32(127) / m
	s = m * float32(1.0/127)
	for r := range g {
		q[r] = int32(math.RoundToEven(float64(c[r] * inv)))
	}
	return s, q, c
}

func nibble(blk []byte, j int) int32 {
	if j < 16 {
		return int32(blk[2+j] & 15)
	}
	return int32(blk[2+j-16] >> 4)
}

// i8Allowance is, per element of y, the most that rounding coef·d to s·q
// can move the sum: Σ over the rows of |c - s·q|·|nib - 8|, taken from
// the data (|c - s·q| is at most s/2, plus float32 slack).
func i8Allowance(w []byte, cols int, ids []int32, coef []float32) []float64 {
	rb := cols / 32 * 18
	out := make([]float64, cols)
	k := 0
	for _, g := range i8Groups(ids, cols/32) {
		for b := range cols / 32 {
			s, _, _ := i8Group(w, rb, ids, coef, k, g, b)
			for r := range g {
				blk := w[int(ids[k+r])*rb+18*b:]
				for j := range 32 {
					out[32*b+j] += (0.5*float64(s) + 1e-6*math.Abs(float64(s))) * math.Abs(float64(nibble(blk, j)-8))
				}
			}
		}
		k += g
	}
	return out
}

// modelAxpyQ4i8 computes what AxpyQ4_0 computes on the int8 paths, in
// plain Go: integer sums per group of rows, the rows left over one by one
// in float32.
func modelAxpyQ4i8(y []float32, w []byte, cols int, ids []int32, coef []float32) (mag []float64) {
	rb := cols / 32 * 18
	mag = make([]float64, cols)
	for j := range y {
		mag[j] = math.Abs(float64(y[j]))
	}
	k := 0
	for _, g := range i8Groups(ids, cols/32) {
		for b := range cols / 32 {
			s, q, _ := i8Group(w, rb, ids, coef, k, g, b)
			for j := range 32 {
				var acc int32
				for r := range g {
					acc += q[r] * (nibble(w[int(ids[k+r])*rb+18*b:], j) - 8)
				}
				p := float64(acc) * float64(s)
				y[32*b+j] = float32(float64(y[32*b+j]) + p)
				mag[32*b+j] += math.Abs(p)
			}
		}
		k += g
	}
	for ; k < len(ids); k++ {
		for b := range cols / 32 {
			blk := w[int(ids[k])*rb+18*b:]
			s := coef[k] * float32(refHalf(le16(blk)))
			for j := range 32 {
				p := float64(s) * float64(nibble(blk, j)-8)
				y[32*b+j] = float32(float64(y[32*b+j]) + p)
				// The f32 kernels may add q·s and the block's -8·s
				// apart (AVX2's does), so their rounding scales with
				// 8|s| too.
				mag[32*b+j] += math.Abs(p) + 8*math.Abs(float64(s))
			}
		}
	}
	return mag
}

func TestAxpyQ4i8Model(t *testing.T) {
	if !hasAVX2 {
		t.Skip("the int8 axpy needs AVX2 or AVX-512; the portable path is held to the reference by TestAxpy")
	}
	r := rand.New(rand.NewPCG(8, 8))
	const nrows = 61
	// 544, 1024 and 1600 columns (17, 32 and 50 blocks): the records of a
	// first sixteen, of whole sixteens made between blocks, of a last
	// partial sixteen. 1024 and 4096 take the sixteen-row kernel too.
	for _, cols := range []int{32, 64, 544, 1024, 1600, 4096, 4128} {
		w := randMatrix(r, kQ4, nrows, cols, 1)
		for _, nr := range []int{8, 16, 21, 40, 61, -16, -21, -48, -61} {
			// n > 0: rows at random; n < 0: a run of -n neighbours,
			// which AVX2 takes in int8 (its scattered rows stay f32).
			n := max(nr, -nr)
			ids := make([]int32, n)
			first := r.IntN(nrows - n + 1)
			for i := range ids {
				ids[i] = int32(first + i)
				if nr > 0 {
					ids[i] = int32(r.IntN(nrows))
				}
			}
			coef := randVec(r, n)
			// A group of zeros (its scale falls back to the tiny one) and a
			// group with one large coefficient beside small ones.
			for i := 0; i < min(n, 8); i++ {
				coef[i] = 0
			}
			if n >= 16 {
				coef[9] = 300
			}
			// On AVX-512 eight-row groups and the sixteen-row kernel
			// (int16Rows); on AVX2 sixteens (axpyQ4i16a).
			for _, c := range i8Cases() {
				t.Run(fmt.Sprintf("cols%d/n%d/%s", cols, nr, c.name), func(t *testing.T) {
					int16Rows, i8Cached = c.sixteen, c.cached
					defer func() { int16Rows, i8Cached = true, false }()
					axpy := AxpyQ4_0
					if c.cached {
						axpy = AxpyQ4_0Cached
					}
					y0 := randVec(r, cols)
					var want, got []float32
					var mag []float64
					tail := n
					onPath(c.path, func() {
						for _, g := range i8Groups(ids, cols/32) {
							tail -= g
						}
						want = append([]float32(nil), y0...)
						mag = modelAxpyQ4i8(want, w, cols, ids, coef)
						got = append([]float32(nil), y0...)
						axpy(got, w, cols, ids, coef)
					})
					// The model adds in float64 and rounds once per group
					// and left-over row; the kernels round in the same
					// places up to a few ulps, and AVX2's f32 kernel once
					// more per left-over row (at most 2^-24 of mag each).
					tol0 := 4e-7 + 6e-8*float64(tail)
					for j := range got {
						tol := tol0*mag[j] + 1e-30
						if !(math.Abs(float64(got[j])-float64(want[j])) <= tol) {
							t.Fatalf("y[%d]: got %g, want %g (tol %g)", j, got[j], want[j], tol)
						}
					}
				})
			}
		}
	}
}

type i8Case struct {
	name, path      string
	sixteen, cached bool
}

// i8Cases are the int8 axpys this CPU runs; on AVX2, AxpyQ4_0Cached's
// too, which takes scattered rows in int8.
func i8Cases() []i8Case {
	c := []i8Case{{"avx2", "avx2", true, false}, {"avx2/cached", "avx2", true, true}}
	if has512Init {
		c = append(c, i8Case{"avx512/eights", "avx512", false, false}, i8Case{"avx512/sixteens", "avx512", true, false})
	}
	return c
}
