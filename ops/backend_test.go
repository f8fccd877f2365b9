package ops

import (
	"math"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// The portable kernels define each op; the package's other tests check them
// against float64 references with the vector path off. The vector path is
// then held to the portable one here, op by op, in the spirit of ggml's
// test-backend-ops.
func TestMain(m *testing.M) {
	fast := Fast
	Fast = false
	code := m.Run()
	Fast = fast
	os.Exit(code)
}

// withFast runs f with the vector kernels on, if this CPU has them.
func withFast(t *testing.T, f func()) {
	if !fastAvailable() {
		t.Log("no AVX2/FMA/F16C here (or built with purego): the vector path is the portable one")
	}
	Fast = fastAvailable()
	defer func() { Fast = false }()
	f()
}

// tolerance for one output: the sum of |terms| scaled by the rounding the
// fast path adds: f32 and f16 only reorder sums; quantized weights also meet
// activations rounded to q8_0, a relative error of up to 1/254 per element.
func tolerance(t DType, absTerms float64) float64 {
	if quantized(t) {
		return absTerms/127 + 1e-5
	}
	return absTerms*1e-5 + 1e-6
}

func randomMatrix(rng *rand.Rand, t DType, rows, cols int) *Matrix {
	src := make([]float32, rows*cols)
	for i := range src {
		src[i] = float32(rng.NormFloat64())
	}
	rb, _ := t.RowBytes(cols)
	data := make([]byte, rb*rows)
	for r := 0; r < rows; r++ {
		if err := Quantize(t, data[r*rb:(r+1)*rb], src[r*cols:(r+1)*cols]); err != nil {
			panic(err)
		}
	}
	m, err := NewMatrix(t, rows, cols, data)
	if err != nil {
		panic(err)
	}
	return m
}

func randomVec(rng *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	return v
}

func absTerms(m *Matrix, r int, x []float32) float64 {
	row := make([]float32, m.Cols)
	m.RowF32(r, row)
	var s float64
	for i, w := range row {
		s += math.Abs(float64(w) * float64(x[i]))
	}
	return s
}

func TestBackendMatMul(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	pool := NewPool(3)
	defer pool.Close()
	for _, typ := range []DType{F32, F16, Q8_0, Q4_0} {
		for _, shape := range [][3]int{{1, 32, 1}, {7, 64, 1}, {33, 96, 3}, {130, 4128, 2}, {5, 32, 9}} {
			rows, cols, T := shape[0], shape[1], shape[2]
			m := randomMatrix(rng, typ, rows, cols)
			x := randomVec(rng, T*cols)
			want := make([]float32, T*rows)
			MatMul(pool, want, m, x, T)
			got := make([]float32, T*rows)
			withFast(t, func() { MatMul(pool, got, m, x, T) })
			for tt := 0; tt < T; tt++ {
				for r := 0; r < rows; r++ {
					tol := tolerance(typ, absTerms(m, r, x[tt*cols:(tt+1)*cols]))
					require.InDelta(t, want[tt*rows+r], got[tt*rows+r], tol, "%s %dx%d T=%d t=%d r=%d", typ, rows, cols, T, tt, r)
				}
			}
		}
	}
}

func TestBackendFFNRow(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	pool := NewPool(2)
	defer pool.Close()
	for _, typ := range []DType{F32, F16, Q8_0, Q4_0} {
		for _, act := range []string{"relu", "drelu", "fatrelu", "silu"} {
			d, nff := 64, 96
			f := &FFN{Gate: randomMatrix(rng, typ, nff, d), Up: randomMatrix(rng, typ, nff, d), Act: act, Threshold: 0.3}
			if act == "relu" {
				f.Up, f.GateBias = nil, randomVec(rng, nff)
			}
			down := randomMatrix(rng, typ, nff, d)
			x := randomVec(rng, d)
			for _, active := range [][]int32{nil, {}, {5}, {0, 3, 17, 40, 95}} {
				want := make([]float32, d)
				FFNRow(pool, f, down, x, active, want)
				got := make([]float32, d)
				withFast(t, func() { FFNRow(pool, f, down, x, active, got) })
				// A neuron near its threshold may fall either side once the
				// activations are rounded, so bound by the largest output.
				var scale float64
				for _, v := range want {
					scale = math.Max(scale, math.Abs(float64(v)))
				}
				for i := range want {
					require.InDelta(t, want[i], got[i], tolerance(typ, scale*4)+1e-4, "%s %s active %v out %d", typ, act, active, i)
				}
			}
		}
	}
}

// A batch computes the union of its tokens' neurons; where each token's set
// already holds every neuron that fires for it (the oracle's sets), that is
// the same as running the tokens one by one.
func TestFFNBatchMatchesRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	pool := NewPool(2)
	defer pool.Close()
	d, nff, T := 64, 200, 5
	f := &FFN{Gate: randomMatrix(rng, F32, nff, d), Up: randomMatrix(rng, F32, nff, d), Act: "relu"}
	down := randomMatrix(rng, F32, nff, d)
	x := randomVec(rng, T*d)
	actives := make([][]int32, T)
	for t := range actives {
		for i := 0; i < nff; i++ {
			if f.Gate.DotRow(i, x[t*d:(t+1)*d]) > 0 {
				actives[t] = append(actives[t], int32(i))
			}
		}
	}
	for _, fast := range []bool{false, true} {
		Fast = fast && fastAvailable()
		batch := make([]float32, T*d)
		FFNBatch(pool, f, down, x, T, actives, batch)
		for tt := 0; tt < T; tt++ {
			row := make([]float32, d)
			FFNRow(pool, f, down, x[tt*d:(tt+1)*d], actives[tt], row)
			dense := make([]float32, d)
			FFNRow(pool, f, down, x[tt*d:(tt+1)*d], nil, dense)
			for i := range row {
				tol := 1e-5*math.Abs(float64(dense[i])) + 1e-4
				require.InDelta(t, row[i], batch[tt*d+i], tol, "fast %v token %d", fast, tt)
				require.InDelta(t, dense[i], row[i], tol, "fast %v token %d", fast, tt)
			}
		}
	}
	Fast = false
}
