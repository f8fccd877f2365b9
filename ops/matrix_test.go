package ops

import (
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var matrixTypes = []DType{F32, F16, BF16, Q8_0, Q4_0}

// randMatrix quantizes random weights and returns the matrix with the values
// it really holds (decoded by Dequantize) in float64.
func randMatrix(t testing.TB, r *rand.Rand, dt DType, rows, cols int) (*Matrix, [][]float64) {
	w := randBlocks(r, rows*cols)
	rb, err := dt.RowBytes(cols)
	require.NoError(t, err)
	data := make([]byte, rows*rb)
	require.NoError(t, Quantize(dt, data, w))
	m, err := NewMatrix(dt, rows, cols, data)
	require.NoError(t, err)
	ref := make([][]float64, rows)
	buf := make([]float32, cols)
	for i := range ref {
		require.NoError(t, Dequantize(dt, buf, data[i*rb:(i+1)*rb]))
		ref[i] = make([]float64, cols)
		for j, v := range buf {
			ref[i][j] = float64(v)
		}
	}
	return m, ref
}

func refDot(w []float64, x []float32) (dot, mag float64) {
	for j, v := range w {
		dot += v * float64(x[j])
		mag += math.Abs(v * float64(x[j]))
	}
	return dot, mag
}

func TestMatrixAgainstFloat64(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	shapes := [][2]int{{1, 32}, {7, 96}, {13, 160}, {5, 256}, {4, 4096 + 32}}
	for _, dt := range matrixTypes {
		sh := shapes
		if dt.BlockElems() == 1 {
			sh = append(sh, [2]int{6, 37}, [2]int{3, 5}) // tails shorter than the unroll
		}
		for _, s := range sh {
			rows, cols := s[0], s[1]
			m, ref := randMatrix(t, r, dt, rows, cols)
			for _, T := range []int{1, 5} {
				x := make([]float32, T*cols)
				for i := range x {
					x[i] = float32(r.NormFloat64())
				}
				for _, threads := range []int{1, 3} {
					p := NewPool(threads)
					if threads == 1 {
						p = nil // nil pool means one thread
					}
					out := make([]float32, T*rows)
					MatMul(p, out, m, x, T)
					p.Close()
					for tt := range T {
						xt := x[tt*cols : (tt+1)*cols]
						for i := range rows {
							want, mag := refDot(ref[i], xt)
							tol := 1e-5*mag + 1e-6
							require.InDelta(t, want, out[tt*rows+i], tol, "%s %dx%d T=%d threads=%d t=%d row %d", dt, rows, cols, T, threads, tt, i)
							if T == 1 {
								require.InDelta(t, want, m.DotRow(i, xt), tol, "%s DotRow %d", dt, i)
							}
						}
					}
				}
			}
			got := make([]float32, cols)
			for i := range rows {
				m.RowF32(i, got)
				for j := range cols {
					require.Equal(t, ref[i][j], float64(got[j]), "%s RowF32 %d,%d", dt, i, j)
				}
			}
		}
	}
}

func TestDotRowNoAlloc(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	x := make([]float32, 256)
	for _, dt := range matrixTypes {
		m, _ := randMatrix(t, r, dt, 2, 256)
		var s float32
		allocs := testing.AllocsPerRun(20, func() { s += m.DotRow(1, x) })
		assert.Zero(t, allocs, "%s", dt)
	}
}

func TestNewMatrixErrors(t *testing.T) {
	_, err := NewMatrix(Q8_0, 2, 64, make([]byte, 2*68-1))
	assert.ErrorContains(t, err, "need 136")
	_, err = NewMatrix(F16, 3, 4, make([]byte, 23))
	assert.ErrorContains(t, err, "need 24")
	_, err = NewMatrix(Q4_1, 1, 32, make([]byte, 20))
	assert.ErrorContains(t, err, "q4_1")
	_, err = NewMatrix(I32, 1, 1, make([]byte, 4))
	assert.ErrorContains(t, err, "i32")
	_, err = NewMatrix(Q4_0, 1, 48, make([]byte, 100))
	assert.ErrorContains(t, err, "whole blocks")
	_, err = NewMatrix(F32, -1, 4, nil)
	assert.Error(t, err)

	// Padding after the tensor is trimmed, so Data is exactly the matrix.
	m, err := NewMatrix(Q4_0, 2, 32, make([]byte, 64))
	require.NoError(t, err)
	assert.Len(t, m.Data, 36)
	assert.Len(t, m.Row(1), 18)
}

// BenchmarkMatVec reports MB/s of weights streamed by a one-token mat-vec.
func BenchmarkMatVec(b *testing.B) {
	const rows, cols = 11008, 4096
	r := rand.New(rand.NewPCG(11, 12))
	w := make([]float32, rows*cols)
	for i := range w {
		w[i] = float32(r.NormFloat64())
	}
	x := make([]float32, cols)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	out := make([]float32, rows)
	p := NewPool(runtime.NumCPU())
	defer p.Close()
	// The portable kernels side by side with what MatMul runs by default
	// (the vector kernels where the CPU has them), so a speed-up is measured.
	for _, path := range []string{"portable", "default"} {
		for _, dt := range []DType{F32, F16, Q8_0, Q4_0} {
			b.Run(path+"/"+dt.String(), func(b *testing.B) {
				Fast = path == "default" && fastAvailable()
				defer func() { Fast = false }()
				rb, _ := dt.RowBytes(cols)
				data := make([]byte, rows*rb)
				require.NoError(b, Quantize(dt, data, w))
				m, err := NewMatrix(dt, rows, cols, data)
				require.NoError(b, err)
				b.SetBytes(int64(len(m.Data)))
				b.ResetTimer()
				for range b.N {
					MatMul(p, out, m, x, 1)
				}
			})
		}
	}
}

// Weights at an odd address cannot be viewed in place and take the byte path.
func TestDotRowUnaligned(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	for _, dt := range []DType{F32, F16} {
		for _, cols := range []int{5, 37, 256} {
			m, ref := randMatrix(t, r, dt, 3, cols)
			odd := make([]byte, len(m.Data)+1)[1:]
			copy(odd, m.Data)
			mu, err := NewMatrix(dt, 3, cols, odd)
			require.NoError(t, err)
			x := make([]float32, cols)
			for i := range x {
				x[i] = float32(r.NormFloat64())
			}
			for i := range 3 {
				want, mag := refDot(ref[i], x)
				require.InDelta(t, want, mu.DotRow(i, x), 1e-5*mag+1e-6, "%s cols=%d row %d", dt, cols, i)
			}
		}
	}
}
