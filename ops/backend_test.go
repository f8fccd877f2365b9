package ops

import (
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pinfer/pinfer/ops/avx2"
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

// fastLevels are the vector kernel sets this CPU runs: AVX2, and AVX-512
// where present (forced off to test AVX2 on the same CPU).
func fastLevels(t *testing.T) []string {
	if !fastAvailable() {
		t.Log("no AVX2/FMA/F16C here (or built with purego): the vector path is the portable one")
		return []string{"go"}
	}
	if avx2.AVX512 {
		return []string{"avx2", "avx2-packed", "avx512", "avx512-packed"}
	}
	return []string{"avx2", "avx2-packed"}
}

// forLevel is m as level runs it: at the -packed levels, a copy with
// q4_0's packed layouts (PackAll's, for mat-vecs and for a dense axpy).
func forLevel(level string, m *Matrix) *Matrix {
	if !strings.HasSuffix(level, "-packed") || m == nil || m.Type != Q4_0 {
		return m
	}
	c := &Matrix{Type: m.Type, Rows: m.Rows, Cols: m.Cols, Data: m.Data}
	c.pack(nil, false)
	c.pack(nil, true)
	return c
}

// ffnForLevel is f and down as level runs them (forLevel).
func ffnForLevel(level string, f *FFN, down *Matrix) (*FFN, *Matrix) {
	c := *f
	c.Gate, c.Up = forLevel(level, f.Gate), forLevel(level, f.Up)
	return &c, forLevel(level, down)
}

// withFast runs f with the vector kernels of level on.
func withFast(level string, f func()) {
	saved := avx2.AVX512
	Fast, avx2.AVX512 = fastAvailable(), saved && strings.HasPrefix(level, "avx512")
	defer func() { Fast, avx2.AVX512 = false, saved }()
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
		for _, shape := range [][3]int{{1, 32, 1}, {7, 64, 1}, {33, 96, 3}, {130, 4128, 2}, {5, 32, 9}, {37, 256, 6}, {64, 4096, 4}, {9, 160, 5}, {37, 512, 1}, {21, 4096, 1}, {61, 96, 1}, {61, 96, 7}} {
			rows, cols, T := shape[0], shape[1], shape[2]
			m := randomMatrix(rng, typ, rows, cols)
			x := randomVec(rng, T*cols)
			want := make([]float32, T*rows)
			MatMul(pool, want, m, x, T)
			for _, lv := range fastLevels(t) {
				got := make([]float32, T*rows)
				withFast(lv, func() { MatMul(pool, got, forLevel(lv, m), x, T) })
				for tt := 0; tt < T; tt++ {
					for r := 0; r < rows; r++ {
						tol := tolerance(typ, absTerms(m, r, x[tt*cols:(tt+1)*cols]))
						require.InDelta(t, want[tt*rows+r], got[tt*rows+r], tol, "%s %s %dx%d T=%d t=%d r=%d", lv, typ, rows, cols, T, tt, r)
					}
				}
			}
		}
	}
}

// A group of matrices over one x: each output as the portable MatMul gives
// it, whether the group runs as one pool call (one type and width: rows of
// several matrices share a piece) or falls back to one call per matrix.
func TestBackendMatMulGroup(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	pool := NewPool(3)
	defer pool.Close()
	for _, types := range [][]DType{{Q4_0, Q4_0, Q4_0}, {F32, F32}, {F16, F16, F16}, {Q8_0, Q8_0}, {Q4_0, F16, Q4_0}} {
		for _, shape := range [][3]int{{5, 64, 1}, {37, 256, 1}, {130, 4096, 1}, {9, 160, 5}, {33, 512, 9}} {
			rows, cols, T := shape[0], shape[1], shape[2]
			ms := make([]*Matrix, len(types))
			want, got := make([][]float32, len(types)), make([][]float32, len(types))
			for k, typ := range types {
				ms[k] = randomMatrix(rng, typ, rows+k*k, cols) // unequal rows: pieces cross matrices
				want[k], got[k] = make([]float32, T*ms[k].Rows), make([]float32, T*ms[k].Rows)
			}
			x := randomVec(rng, T*cols)
			for k, m := range ms {
				MatMul(pool, want[k], m, x, T)
			}
			for _, lv := range fastLevels(t) {
				lms := make([]*Matrix, len(ms))
				for k, m := range ms {
					lms[k] = forLevel(lv, m)
				}
				withFast(lv, func() { MatMulGroup(pool, got, lms, x, T) })
				for k, m := range ms {
					for tt := 0; tt < T; tt++ {
						for r := 0; r < m.Rows; r++ {
							tol := tolerance(m.Type, absTerms(m, r, x[tt*cols:(tt+1)*cols]))
							require.InDelta(t, want[k][tt*m.Rows+r], got[k][tt*m.Rows+r], tol, "%s %v %dx%d T=%d matrix %d t=%d r=%d", lv, types, m.Rows, cols, T, k, tt, r)
						}
					}
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
		for i, act := range []string{"relu", "drelu", "fatrelu", "silu"} {
			d, nff := 64, 96
			if i%2 == 1 {
				d = 512 // q4_0 rows packed for the one-token AVX-512 kernel
			}
			f := &FFN{Gate: randomMatrix(rng, typ, nff, d), Up: randomMatrix(rng, typ, nff, d), Act: act, Threshold: 0.3}
			if act == "relu" {
				f.Up, f.GateBias = nil, randomVec(rng, nff)
			}
			down := randomMatrix(rng, typ, nff, d)
			x := randomVec(rng, d)
			for _, active := range [][]int32{nil, {}, {5}, {0, 3, 17, 40, 95}} {
				want := make([]float32, d)
				FFNRow(pool, f, down, x, active, want)
				for _, lv := range fastLevels(t) {
					got := make([]float32, d)
					fl, dl := ffnForLevel(lv, f, down)
					withFast(lv, func() { FFNRow(pool, fl, dl, x, active, got) })
					// A neuron near its threshold may fall either side once the
					// activations are rounded, so bound by the largest output.
					var scale float64
					for _, v := range want {
						scale = math.Max(scale, math.Abs(float64(v)))
					}
					for i := range want {
						require.InDelta(t, want[i], got[i], tolerance(typ, scale*4)+1e-4, "%s %s %s active %v out %d", lv, typ, act, active, i)
					}
				}
			}
		}
	}
}

// unit is the j-th basis vector of length d: DotRow with it reads one weight.
func unit(d, j int) []float32 {
	e := make([]float32, d)
	e[j] = 1
	return e
}

// A batch shares out the union of its tokens' neurons and each token
// computes its own; where each token's set already holds every neuron that
// fires for it (the oracle's sets), that is the same as running the tokens
// one by one.
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
	// The float64 result of each token's firing neurons, and a bound on the
	// float32 rounding of any order of summation: (2d + n)·ε times the sum
	// of the magnitudes behind every term.
	ref, bound := make([]float64, T*d), make([]float64, T*d)
	for tt := 0; tt < T; tt++ {
		xt := x[tt*d : (tt+1)*d]
		n := float64(len(actives[tt]))
		for _, k := range actives[tt] {
			var g, u, gm, um float64
			for j, v := range xt {
				gw, uw := float64(f.Gate.DotRow(int(k), unit(d, j))), float64(f.Up.DotRow(int(k), unit(d, j)))
				g, u = g+gw*float64(v), u+uw*float64(v)
				gm, um = gm+math.Abs(gw*float64(v)), um+math.Abs(uw*float64(v))
			}
			for i := 0; i < d; i++ {
				dw := float64(down.DotRow(int(k), unit(d, i)))
				ref[tt*d+i] += g * u * dw
				bound[tt*d+i] += (2*float64(d) + n) * 6e-8 * gm * um * math.Abs(dw)
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
				want, tol := ref[tt*d+i], bound[tt*d+i]+1e-6
				require.InDelta(t, want, row[i], tol, "fast %v token %d: active set", fast, tt)
				require.InDelta(t, want, batch[tt*d+i], tol, "fast %v token %d: batch", fast, tt)
				require.InDelta(t, want, dense[i], tol, "fast %v token %d: every neuron", fast, tt)
			}
		}
	}
	Fast = false
}

// Prefill: the batch path (union of the tokens' neurons, several tokens per
// weight load) against the portable kernels, for every weight type.
func TestBackendFFNBatch(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	pool := NewPool(2)
	defer pool.Close()
	d, nff, T := 256, 300, 7
	for _, typ := range []DType{F32, F16, Q8_0, Q4_0} {
		f := &FFN{Gate: randomMatrix(rng, typ, nff, d), Up: randomMatrix(rng, typ, nff, d), Act: "relu"}
		down := randomMatrix(rng, typ, nff, d)
		x := randomVec(rng, T*d)
		actives := make([][]int32, T)
		for tt := range actives {
			for i := 0; i < nff; i++ {
				if rng.IntN(4) == 0 {
					actives[tt] = append(actives[tt], int32(i))
				}
			}
		}
		for _, acts := range [][][]int32{nil, actives} {
			want := make([]float32, T*d)
			FFNBatch(pool, f, down, x, T, acts, want)
			var scale float64
			for _, v := range want {
				scale = math.Max(scale, math.Abs(float64(v)))
			}
			for _, lv := range fastLevels(t) {
				got := make([]float32, T*d)
				fl, dl := ffnForLevel(lv, f, down)
				withFast(lv, func() { FFNBatch(pool, fl, dl, x, T, acts, got) })
				for i := range want {
					require.InDelta(t, want[i], got[i], tolerance(typ, scale*4)+1e-4, "%s %s sparse %v out %d", lv, typ, acts != nil, i)
				}
			}
		}
	}
}

// A prefill, token by token, and a decode step over predicted neurons
// (T=1) skip the up rows whose gate did not fire and the down rows whose
// activation is zero: each skipped product is an exact zero, so the output
// must match the one that reads every row up to the rounding of a
// different kernel grouping the rows (a skipped firing neuron moves it by
// far more), for each gated activation, with a gate bias or without.
func TestPrefillUpSkipExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	pool := NewPool(2)
	defer pool.Close()
	d, nff := 128, 300
	for _, act := range []string{"relu", "fatrelu", "drelu"} {
		for _, T := range []int{1, 4, 7, 9} {
			f := &FFN{Gate: randomMatrix(rng, Q4_0, nff, d), Up: randomMatrix(rng, Q4_0, nff, d), Act: act, Threshold: 0.5}
			if T == 7 {
				f.GateBias = randomVec(rng, nff)
			}
			down := randomMatrix(rng, Q4_0, nff, d)
			x := randomVec(rng, T*d)
			var actives [][]int32 // decode skips rows of predicted neurons only
			if T == 1 {
				actives = [][]int32{randomActive(rng, nff)}
			}
			for _, lv := range fastLevels(t) {
				skip, all := make([]float32, T*d), make([]float32, T*d)
				withFast(lv, func() {
					FFNBatch(pool, f, down, x, T, actives, skip)
					skipRows = false
					defer func() { skipRows = true }()
					FFNBatch(pool, f, down, x, T, actives, all)
				})
				var scale float64
				for _, v := range all {
					scale = math.Max(scale, math.Abs(float64(v)))
				}
				tol := 1e-5 * scale
				if strings.HasPrefix(lv, "avx512") && T == 1 {
					// One token's q4_0 down rows go through the int8 axpy, which
					// rounds each eight rows' coefficients with one scale: with
					// the zero rows gone the eights differ, and so does the
					// rounding (the other levels hold the skip exact).
					tol = scale / 64
				}
				for i := range all {
					require.InDelta(t, all[i], skip[i], tol, "%s %s T=%d out %d", lv, act, T, i)
				}
			}
		}
	}
}

// randomActive is a sorted random half of n neurons.
func randomActive(rng *rand.Rand, n int) []int32 {
	var a []int32
	for i := range n {
		if rng.IntN(2) == 0 {
			a = append(a, int32(i))
		}
	}
	return a
}

// TestDecodeSkipCounts: a decode step over predicted neurons leaves unread
// the up and down rows of the neurons whose gate does not fire, and says
// so; the counts are checked against gates computed here in float64.
func TestDecodeSkipCounts(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	pool := NewPool(2)
	defer pool.Close()
	d, nff := 64, 200
	for _, act := range []string{"relu", "fatrelu", "silu"} {
		f := &FFN{Gate: randomMatrix(rng, F32, nff, d), Up: randomMatrix(rng, F32, nff, d), Act: act, Threshold: 0.5, Skipped: new(Skipped)}
		down := randomMatrix(rng, F32, nff, d)
		x := randomVec(rng, d)
		active := randomActive(rng, nff)
		FFNRow(pool, f, down, x, active, make([]float32, d))
		cut := map[string]float64{"relu": 0, "fatrelu": 0.5}
		want := 0
		for _, id := range active {
			var g float64
			row := make([]float32, d)
			f.Gate.RowF32(int(id), row)
			for j := range row {
				g += float64(row[j]) * float64(x[j])
			}
			if c, ok := cut[act]; ok && g <= c {
				want++
			}
		}
		require.EqualValues(t, want, f.Skipped.Up, "%s: up rows skipped", act)
		require.EqualValues(t, want, f.Skipped.Down, "%s: down rows skipped", act)
		if act != "silu" {
			require.Positive(t, want, "%s: no gate below its cut: the test checks nothing", act)
		}
	}
}

// activate, the FFN's loop over a piece's neurons, gives what
// FFNActivation defines for every activation, with and without an up
// projection and a gate bias, gates at the cut included.
func TestActivateMatchesDefinition(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	const n = 203
	for _, act := range []string{"relu", "fatrelu", "drelu", "silu", "gelu"} {
		for _, up := range []bool{false, true} {
			for _, bias := range []bool{false, true} {
				f := &FFN{Act: act, Threshold: 0.25}
				if up {
					f.Up = &Matrix{}
				}
				ids := make([]int32, n)
				g, u := randomVec(rng, n), randomVec(rng, n)
				for i := range ids {
					ids[i] = int32(2 * i)
				}
				g[0], g[1], u[2] = 0, 0.25, 0 // at relu's and fatrelu's cut; drelu's up at 0
				nan := float32(math.NaN())
				g[3], u[4], g[5], u[5] = nan, nan, 2, nan // NaNs pass through as defined
				if bias {
					f.GateBias = randomVec(rng, 2*n)
				}
				got := append([]float32(nil), g...)
				var uu []float32
				if up {
					uu = u
				}
				activate(f, got, uu, ids)
				for i, id := range ids {
					gi, ui := g[i], float32(1)
					if bias {
						gi += f.GateBias[id]
					}
					if up {
						ui = u[i]
					}
					want := FFNActivation(act, f.Threshold, gi, ui)
					if want != want { // NaN
						require.True(t, got[i] != got[i], "%s up=%v bias=%v neuron %d: got %v, want NaN", act, up, bias, i, got[i])
						continue
					}
					require.Equal(t, want, got[i], "%s up=%v bias=%v neuron %d", act, up, bias, i)
				}
			}
		}
	}
}
