package avx2

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
)

// fuzzShape turns fuzzer input into a kernel call: a kind, cols, a matrix
// filled from data (any bytes: NaN, Inf and subnormals included), an index
// list from sel (nil when sel is empty) and an unaligned offset.
func fuzzShape(kb byte, c uint16, nr uint8, sel, data []byte) (k kind, cols int, w []byte, rows []int32, nrows int) {
	k = kind(kb % 4)
	if k == kF32 || k == kF16 {
		cols = 1 + int(c)%300
	} else {
		cols = 32 * (1 + int(c)%10)
	}
	nrows = 1 + int(nr)%20
	rb := k.rowBytes(cols)
	off := int(kb/4) % 4
	buf := make([]byte, off+nrows*rb)
	w = buf[off:]
	if len(data) > 0 {
		for i := range w {
			w[i] = data[i%len(data)] ^ byte(i/len(data))
		}
	}
	if len(sel) > 0 {
		rows = make([]int32, 0, len(sel))
		for _, s := range sel[:min(len(sel), 64)] {
			rows = append(rows, int32(int(s)%nrows))
		}
	}
	return
}

func fuzzSeeds(f *testing.F) {
	f.Add(byte(0), uint16(4099), uint8(9), []byte{}, []byte{1, 2, 3})
	f.Add(byte(1), uint16(33), uint8(5), []byte{4, 1, 1, 0}, []byte{0x3c, 0x00, 0x7c})
	f.Add(byte(2), uint16(3), uint8(7), []byte{6, 5, 4, 3, 2}, []byte{0x80, 0x7f, 0x11})
	f.Add(byte(7), uint16(0), uint8(3), []byte{2}, []byte{0xff})
}

func FuzzGather(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, kb byte, c uint16, nr uint8, sel, data []byte) {
		k, cols, w, rows, nrows := fuzzShape(kb, c, nr, sel, data)
		r := rand.New(rand.NewPCG(uint64(c), uint64(nr)))
		x := randVec(r, cols)
		n := len(rows)
		if rows == nil {
			n = nrows
		}
		forPaths(t, func(t *testing.T) {
			out := make([]float32, n)
			xr := gather(k, out, w, cols, rows, x)
			checkGatherRef(t, k, out, w, cols, rows, xr)
		})
	})
}

func FuzzAxpy(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, kb byte, c uint16, nr uint8, sel, data []byte) {
		k, cols, w, rows, nrows := fuzzShape(kb, c, nr, sel, data)
		r := rand.New(rand.NewPCG(uint64(c), uint64(nr)))
		n := len(rows)
		if rows == nil {
			n = nrows
		}
		coef := randVec(r, n)
		y0 := randVec(r, cols)
		for _, p := range paths() {
			onPath(p, func() {
				y := append([]float32(nil), y0...)
				axpy(k, y, w, cols, rows, coef)
				checkAxpyRef(t, k, y, y0, w, cols, rows, coef)
			})
		}
	})
}

// FuzzGatherActs: the q4_0 mat-mat of a prefill (the 4x4 and sixteen-row
// kernels, by token count) on fuzzed weights, rows and token counts.
func FuzzGatherActs(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, kb byte, c uint16, nr uint8, sel, data []byte) {
		_, cols, w, rows, nrows := fuzzShape(kb|byte(kQ4), c, nr, sel, data)
		T := 1 + int(c/10)%24
		for _, p := range paths() {
			onPath(p, func() {
				checkActs(t, w, cols, rows, nrows, T, rand.New(rand.NewPCG(uint64(c), uint64(nr))))
			})
		}
	})
}

// FuzzExpSum: every path's exponentials within 3e-7 of math.Exp's (or
// both below 1e-30), for any float32 inputs at or below m.
func FuzzExpSum(f *testing.F) {
	f.Add([]byte{0, 0, 0x80, 0xbf, 0, 0, 0xc8, 0xc2}, float32(0.5))
	f.Fuzz(func(t *testing.T, data []byte, m float32) {
		x0 := make([]float32, len(data)/4)
		for i := range x0 {
			x0[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
		}
		if math.IsNaN(float64(m)) || math.IsInf(float64(m), 0) {
			return
		}
		for i, v := range x0 {
			if math.IsNaN(float64(v)) || v > m {
				x0[i] = m // softmax subtracts the largest
			}
		}
		for _, p := range paths() {
			onPath(p, func() {
				x := append([]float32(nil), x0...)
				ExpSum(x, m)
				for i, v := range x0 {
					e := math.Exp(float64(v - m))
					if e < 1e-30 {
						if x[i] >= 1e-30 {
							t.Fatalf("%s: e^(%g-%g) = %g, want < 1e-30", p, v, m, x[i])
						}
						continue
					}
					if d := math.Abs(float64(x[i])-e) / e; d > 3e-7 {
						t.Fatalf("%s: e^(%g-%g) = %g, want %g (rel %g)", p, v, m, x[i], e, d)
					}
				}
			})
		}
	})
}

// fuzzFloats reads data as little-endian float32s.
func fuzzFloats(data []byte) []float32 {
	x := make([]float32, len(data)/4)
	for i := range x {
		x[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
	}
	return x
}

// FuzzDotSum: Dot and Sum on every path within the error bound of a float32
// sum of n terms, (n+1)·2^-23 of the sum of magnitudes. Inputs keep their
// sign, mantissa and the low seven bits of their exponent (|x| < 2, from
// subnormals up), so that every input is finite and no sum overflows.
func FuzzDotSum(f *testing.F) {
	seed := make([]byte, 4*37)
	for i := range seed {
		seed[i] = byte(i * 37)
	}
	f.Add(seed)
	f.Fuzz(func(t *testing.T, data []byte) {
		x := fuzzFloats(data)
		for i, v := range x {
			x[i] = math.Float32frombits(math.Float32bits(v) &^ 0x40000000)
		}
		n := len(x) / 2
		a, b := x[:n], x[n:2*n]
		var dot, dmag, sum, smag float64
		for i := range a {
			p := float64(a[i]) * float64(b[i])
			dot, dmag = dot+p, dmag+math.Abs(p)
			sum, smag = sum+float64(a[i]), smag+math.Abs(float64(a[i]))
		}
		tol := float64(n+1) * 0x1p-23
		for _, p := range paths() {
			onPath(p, func() {
				if d, s := float64(Dot(a, b)), float64(Sum(a)); !(math.Abs(d-dot) <= tol*dmag+1e-35) || !(math.Abs(s-sum) <= tol*smag+1e-35) {
					t.Fatalf("%s, n=%d: Dot %g (want %g), Sum %g (want %g)", p, n, d, dot, s, sum)
				}
				if s := float64(SumRuns(a)); !(math.Abs(s-sum) <= tol*smag+1e-35) {
					t.Fatalf("%s, n=%d: SumRuns %g (want %g)", p, n, s, sum)
				}
			})
		}
	})
}

// FuzzEncodeF16: every path's half for any float32 input is the nearest,
// ties to even (checkHalf).
func FuzzEncodeF16(f *testing.F) {
	f.Add([]byte{0, 0xf0, 0x7f, 0x47, 0, 0, 0x80, 0x33, 0, 0, 0xc0, 0x7f, 1, 0, 0, 0x80})
	f.Fuzz(func(t *testing.T, data []byte) {
		x := fuzzFloats(data)
		for _, p := range paths() {
			onPath(p, func() {
				h := make([]uint16, len(x))
				EncodeF16(h, x)
				for i := range x {
					checkHalf(t, x[i], h[i])
				}
			})
		}
	})
}
