//go:build cuda

package cuda_test

import (
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/pinfer/pinfer/engine"
	"github.com/pinfer/pinfer/hybrid"
	"github.com/pinfer/pinfer/ops"
	"github.com/pinfer/pinfer/ops/cuda"
	"github.com/pinfer/pinfer/placement"
	"github.com/pinfer/pinfer/predictors"
	"github.com/pinfer/pinfer/sample"
	"github.com/stretchr/testify/require"
)

// The hybrid path is held to the CPU path: the backend's FFN share and
// mat-vecs against the portable ops, and whole greedy generations against
// the CPU's tokens.

func randMat(t *testing.T, r *rand.Rand, typ ops.DType, rows, cols int) *ops.Matrix {
	rb, err := typ.RowBytes(cols)
	require.NoError(t, err)
	data := make([]byte, rows*rb)
	row := make([]float32, cols)
	for i := 0; i < rows; i++ {
		for j := range row {
			row[j] = float32(r.NormFloat64())
		}
		require.NoError(t, ops.Quantize(typ, data[i*rb:(i+1)*rb], row))
	}
	m, err := ops.NewMatrix(typ, rows, cols, data)
	require.NoError(t, err)
	return m
}

func randF(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	return v
}

// use makes b the device for the rest of the test.
func use(t *testing.T, b *cuda.Backend) {
	ops.Device = b
	t.Cleanup(func() {
		ops.Device = nil
		require.NoError(t, b.Close())
	})
}

// ffnRef is the FFN in float64 over dequantized rows, and per output
// element the sum of |terms|, which scales the tolerance: the CPU's share
// may run on activations quantized to q8_0, and sums run in other orders.
func ffnRef(f *ops.FFN, down *ops.Matrix, x []float32, T int, actives [][]int32) (want, scale []float64) {
	d, dim, nff := f.Gate.Cols, down.Cols, f.Gate.Rows
	want, scale = make([]float64, T*dim), make([]float64, T*dim)
	row := make([]float32, max(d, dim))
	dot := func(m *ops.Matrix, id int, xt []float32) float64 {
		m.RowF32(id, row)
		var s float64
		for j, v := range xt {
			s += float64(row[j]) * float64(v)
		}
		return s
	}
	for t := 0; t < T; t++ {
		xt := x[t*d : (t+1)*d]
		ids := actives[t]
		if ids == nil {
			for i := 0; i < nff; i++ {
				ids = append(ids, int32(i))
			}
		}
		for _, id := range ids {
			g, u := dot(f.Gate, int(id), xt), 1.0
			if f.GateBias != nil {
				g += float64(f.GateBias[id])
			}
			if f.Up != nil {
				u = dot(f.Up, int(id), xt)
			}
			a := float64(ops.FFNActivation(f.Act, f.Threshold, float32(g), float32(u)))
			down.RowF32(int(id), row)
			for c := 0; c < dim; c++ {
				want[t*dim+c] += a * float64(row[c])
				scale[t*dim+c] += math.Abs(a * float64(row[c]))
			}
		}
	}
	return want, scale
}

// The FFN over hot (GPU) and cold (CPU) neurons equals the float64 FFN over
// the active ones, for every activation, with and without up and bias, for
// several tokens each with its own active set, and one with all neurons.
func TestBackendFFN(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	pool := ops.NewPool(2)
	defer pool.Close()
	for _, c := range []struct {
		typ  ops.DType
		act  string
		up   bool
		bias bool
	}{{ops.Q4_0, "relu", true, false}, {ops.F16, "fatrelu", true, true}, {ops.Q8_0, "drelu", true, false}, {ops.F32, "silu", false, true}, {ops.F16, "gelu", true, false}} {
		d, nff, T := 256, 640, 3
		f := &ops.FFN{Gate: randMat(t, r, c.typ, nff, d), Act: c.act, Threshold: 0.3}
		if c.up {
			f.Up = randMat(t, r, c.typ, nff, d)
		}
		if c.bias {
			f.GateBias = randF(r, nff)
		}
		down := randMat(t, r, c.typ, nff, d)
		var hot []int32
		for i := 0; i < nff; i++ {
			if r.Float64() < 0.4 {
				hot = append(hot, int32(i))
			}
		}
		actives := make([][]int32, T)
		for tk := 0; tk < T-1; tk++ {
			actives[tk] = []int32{}
			for i := 0; i < nff; i++ {
				if r.Float64() < 0.3 {
					actives[tk] = append(actives[tk], int32(i))
				}
			}
		}
		x := randF(r, T*d)
		b, err := cuda.NewBackend(0, &cuda.Residency{FFNs: []cuda.HotFFN{{Gate: f.Gate, Up: f.Up, Down: down, GateBias: f.GateBias, Act: f.Act, Threshold: f.Threshold, Hot: hot}}})
		require.NoError(t, err)
		tol := 1e-4
		if c.typ == ops.Q4_0 || c.typ == ops.Q8_0 {
			tol = 1e-2
		}
		// Each token alone computes exactly its active set; a batch computes
		// the union of the CPU's lists for every token, so it is checked
		// with every neuron active.
		want, scale := ffnRef(f, down, x, T, actives)
		dense, dscale := ffnRef(f, down, x, T, make([][]int32, T))
		got := make([]float32, T*d)
		batch := make([]float32, T*d)
		ops.Device = b
		for tk := 0; tk < T; tk++ {
			var a [][]int32
			if actives[tk] != nil {
				a = [][]int32{actives[tk]}
			}
			ops.FFNBatch(pool, f, down, x[tk*d:(tk+1)*d], 1, a, got[tk*d:(tk+1)*d])
		}
		ops.FFNBatch(pool, f, down, x, T, nil, batch)
		ops.Device = nil
		require.NoError(t, b.Err())
		require.NoError(t, b.Close())
		for i := range want {
			require.InDelta(t, want[i], float64(got[i]), tol*scale[i]+1e-4, "%s %s: element %d", c.typ, c.act, i)
			require.InDelta(t, dense[i], float64(batch[i]), tol*dscale[i]+1e-4, "%s %s batched: element %d", c.typ, c.act, i)
		}
	}
}

// A resident matrix multiplies on the GPU for several rows at once, as a
// float64 product of its dequantized rows; one that is not resident is
// declined.
func TestBackendMatMul(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, typ := range []ops.DType{ops.F32, ops.F16, ops.Q8_0, ops.Q4_0} {
		rows, cols, T := 300, 512, 3
		m := randMat(t, r, typ, rows, cols)
		x := randF(r, T*cols)
		b, err := cuda.NewBackend(0, &cuda.Residency{Dense: []*ops.Matrix{m}})
		require.NoError(t, err)
		require.False(t, b.MatMul(make([]float32, rows), randMat(t, r, typ, rows, cols), x, 1), "not resident")
		got := make([]float32, T*rows)
		require.True(t, b.MatMul(got, m, x, T))
		require.NoError(t, b.Close())
		w := make([]float32, cols)
		if typ == ops.Q4_0 {
			// q4_0 rows meet x rounded to q8_0, as on the CPU.
			q := make([]byte, T*cols/32*34)
			require.NoError(t, ops.Quantize(ops.Q8_0, q, x))
			require.NoError(t, ops.Dequantize(ops.Q8_0, x, q))
		}
		for k := 0; k < rows; k++ {
			m.RowF32(k, w)
			for tk := 0; tk < T; tk++ {
				var s, abs float64
				for j, v := range x[tk*cols : (tk+1)*cols] {
					s += float64(w[j]) * float64(v)
					abs += math.Abs(float64(w[j]) * float64(v))
				}
				require.InDelta(t, s, float64(got[tk*rows+k]), 1e-5*abs+1e-6, "%s: row %d token %d", typ, k, tk)
			}
		}
	}
}

// repoFile finds a file of the repository from the working directory up
// (a test binary may run from the repository root or the package).
func repoFile(t *testing.T, rel string) string {
	dir, err := os.Getwd()
	require.NoError(t, err)
	for {
		p := filepath.Join(dir, rel)
		if _, err := os.Stat(p); err == nil {
			return p
		}
		up := filepath.Dir(dir)
		if up == dir {
			t.Fatalf("%s not found above the working directory", rel)
		}
		dir = up
	}
}

func copyFile(t *testing.T, src, dst string) {
	in, err := os.Open(src)
	require.NoError(t, err)
	defer in.Close()
	out, err := os.Create(dst)
	require.NoError(t, err)
	_, err = io.Copy(out, in)
	require.NoError(t, err)
	require.NoError(t, out.Close())
}

// greedy generates n tokens after prompt on whatever ops.Device is.
func greedy(t *testing.T, m *engine.Model, pred predictors.Predictor, prompt []int, n int) []int {
	res, err := m.Generate(engine.Options{PromptIDs: prompt, N: n, Threads: 8, Sample: sample.Params{Temp: 0}, Predictor: pred})
	require.NoError(t, err)
	require.Len(t, res.Tokens, n)
	return res.Tokens
}

// onGPU puts plan on the GPU for the rest of the test and returns what went.
func onGPU(t *testing.T, m *engine.Model, plan *placement.Plan) *cuda.Residency {
	r, err := hybrid.Resident(m.Prog, plan)
	require.NoError(t, err)
	b, err := cuda.NewBackend(0, r)
	require.NoError(t, err)
	use(t, b)
	return r
}

func fileSize(t *testing.T, path string) uint64 {
	st, err := os.Stat(path)
	require.NoError(t, err)
	return uint64(st.Size())
}

// checkHybrid runs the greedy comparison for a model at half its size and
// at more than its size (all of it on the GPU), and at budget 0.
func checkHybrid(t *testing.T, path string, predName string, prompts [][]int) {
	m, err := engine.Load(path, "")
	require.NoError(t, err)
	defer m.Close()
	pred, err := m.Predictor(predName)
	require.NoError(t, err)
	var want [][]int
	for _, p := range prompts {
		want = append(want, greedy(t, m, pred, p, 32))
	}
	size := fileSize(t, path)
	pool := ops.NewPool(8)
	defer pool.Close()

	plan, err := hybrid.Plan(m, hybrid.Options{Budget: 0, Pool: pool})
	require.NoError(t, err)
	r, err := hybrid.Resident(m.Prog, plan)
	require.NoError(t, err)
	require.Empty(t, r.Dense, "budget 0")
	require.Empty(t, r.FFNs, "budget 0")

	prof, err := hybrid.Calibrate(m, pool)
	require.NoError(t, err)
	for _, c := range []struct {
		name   string
		budget uint64
	}{{"half", size / 2}, {"all", size + size/4}} {
		t.Run(c.name, func(t *testing.T) {
			plan, err := hybrid.Plan(m, hybrid.Options{Budget: c.budget, Reset: true, Profile: prof, Log: os.Stderr})
			require.NoError(t, err)
			r := onGPU(t, m, plan)
			require.NotEmpty(t, r.Dense)
			hot, all := 0, 0
			for _, l := range m.Prog.Layers {
				all += l.NFF
			}
			for _, f := range r.FFNs {
				hot += len(f.Hot)
			}
			if c.name == "all" {
				require.Equal(t, all, hot, "every neuron on the GPU")
				require.Len(t, r.FFNs, len(m.Prog.Layers))
				for _, n := range m.Prog.Nodes {
					if n.Op.Name == "matmul" || n.Op.Name == "output" {
						require.Contains(t, r.Dense, n.W[0].M, "%s on the GPU", n.W[0].Name)
					}
				}
			}
			t.Logf("%s: %d dense matrices, %d of %d neurons on the GPU", c.name, len(r.Dense), hot, all)
			for i, p := range prompts {
				require.Equal(t, want[i], greedy(t, m, pred, p, 32), "prompt %v", p)
			}
			require.NoError(t, ops.Device.(*cuda.Backend).Err())
		})
	}
}

func TestHybridGreedyShakespeare(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shakespeare.gguf") // the index is cached beside it
	copyFile(t, repoFile(t, "models/shakespeare-relu-6m-f16.gguf"), path)
	checkHybrid(t, path, "oracle", [][]int{{1}, {1, 306, 626, 451}, {1, 13, 100, 200}})
}

// PINFER_7B names a file from `pinfer gen --shape 7b --active 0.1 --type q4_0`.
func TestHybridGreedy7B(t *testing.T) {
	path := os.Getenv("PINFER_7B")
	if path == "" {
		t.Fatal("set PINFER_7B to a file made by: pinfer gen --shape 7b --active 0.1 --type q4_0 -o FILE")
	}
	checkHybrid(t, path, "", [][]int{{1}})
}

// checkDevice holds the all-on-the-GPU executor to the CPU: the same greedy
// tokens for 32 steps, a second run on a new session giving them again, and
// (with the mlp predictor) a plausible share of neurons computed.
func checkDevice(t *testing.T, path, predName string, prompts [][]int) {
	checkDeviceAt(t, path, predName, prompts, 0, false)
}

// checkDeviceAt is checkDevice with the executor under a placement of
// frac of the file (0: all on the GPU): cold neurons on the CPU, and where
// hostMats is set, mat-vecs too (which the placement must then leave).
func checkDeviceAt(t *testing.T, path, predName string, prompts [][]int, frac float64, hostMats bool) {
	m, err := engine.Load(path, "")
	require.NoError(t, err)
	defer m.Close()
	pred, err := m.Predictor(predName)
	require.NoError(t, err)
	var want [][]int
	for _, p := range prompts {
		want = append(want, greedy(t, m, pred, p, 32))
	}
	mode := "dense"
	if pred.Name() == "mlp" {
		mode = "mlp"
	}
	o := hybrid.DeviceOptions{Predictor: mode, Log: os.Stderr}
	if frac > 0 {
		pool := ops.NewPool(8)
		defer pool.Close()
		prof, err := hybrid.Calibrate(m, pool)
		require.NoError(t, err)
		plan, err := hybrid.Plan(m, hybrid.Options{Budget: uint64(frac * float64(fileSize(t, path))), Reset: true, Profile: prof})
		require.NoError(t, err)
		o.Resident, err = hybrid.Resident(m.Prog, plan)
		require.NoError(t, err)
		hot, all := 0, 0
		for _, f := range o.Resident.FFNs {
			hot += len(f.Hot)
		}
		for _, l := range m.Prog.Layers {
			all += l.NFF
		}
		require.Positive(t, hot)
		require.Less(t, hot, all, "some neurons stay on the CPU")
		onGPU := map[*ops.Matrix]bool{}
		for _, d := range o.Resident.Dense {
			onGPU[d] = true
		}
		left := 0
		for _, n := range m.Prog.Nodes {
			if (n.Op.Name == "matmul" || n.Op.Name == "output") && !onGPU[n.W[0].M] {
				left++
			}
		}
		for _, l := range m.Prog.Layers {
			if !onGPU[l.FC1] {
				left++
			}
		}
		require.Equal(t, hostMats, left > 0, "mat-vecs and predictors left on the CPU: %d", left)
		t.Logf("%.0f%% of the file: %d dense matrices (%d mat-vecs and predictors on the CPU), %d of %d neurons on the GPU", 100*frac, len(o.Resident.Dense), left, hot, all)
	}
	e, err := hybrid.NewDeviceExec(m.Prog, o)
	require.NoError(t, err)
	orig := m.Prog
	m.Prog = e.Program()
	defer func() {
		m.Prog = orig
		require.NoError(t, e.Close())
	}()
	for i, p := range prompts {
		require.Equal(t, want[i], greedy(t, m, pred, p, 32), "prompt %v", p)
	}
	require.Equal(t, want[0], greedy(t, m, pred, prompts[0], 32), "prompt %v again", prompts[0])
	tokens, active, err := e.SparseCounts()
	require.NoError(t, err)
	require.Positive(t, tokens)
	for k, a := range active {
		frac := float64(a) / float64(tokens) / float64(orig.Layers[k].NFF)
		require.True(t, frac > 0 && frac <= 1, "layer %d computed %.3f of its neurons", k, frac)
		if k == 0 {
			t.Logf("%s: %d steps, layer 0 computed %.1f%% of its neurons per token", mode, tokens, 100*frac)
		}
	}
}

func TestDeviceGreedyShakespeare(t *testing.T) {
	checkDevice(t, repoFile(t, "models/shakespeare-relu-6m-f16.gguf"), "oracle", [][]int{{1}, {1, 306, 626, 451}, {1, 13, 100, 200}})
}

// The executor under a budget, the CPU working between its graphs. At half
// of the 7B file every mat-vec and the hot neurons are on the GPU, the cold
// neurons on the CPU; at a quarter the last layers' attention and
// predictors stay in CPU memory too, and run there.
func TestSplitGreedy7B(t *testing.T) {
	path := os.Getenv("PINFER_7B")
	if path == "" {
		t.Fatal("set PINFER_7B to a file made by: pinfer gen --shape 7b --active 0.1 --type q4_0 -o FILE")
	}
	t.Run("50%", func(t *testing.T) { checkDeviceAt(t, path, "", [][]int{{1}}, 0.5, false) })
	t.Run("25%", func(t *testing.T) { checkDeviceAt(t, path, "", [][]int{{1}}, 0.25, true) })
}

// PINFER_7B names a file from `pinfer gen --shape 7b --active 0.1 --type q4_0`.
// Prompt {1} must give the CPU's 32 greedy tokens exactly. The random
// weights leave near-ties in other prompts, where a different summation
// order may pick the other token: lockstep checks those, CPU and device fed
// the CPU's tokens, each disagreement within the two paths' logit noise.
func TestDeviceGreedy7B(t *testing.T) {
	path := os.Getenv("PINFER_7B")
	if path == "" {
		t.Fatal("set PINFER_7B to a file made by: pinfer gen --shape 7b --active 0.1 --type q4_0 -o FILE")
	}
	checkDevice(t, path, "", [][]int{{1}})
	m, err := engine.Load(path, "")
	require.NoError(t, err)
	defer m.Close()
	pred, err := m.Predictor("")
	require.NoError(t, err)
	e, err := hybrid.NewDeviceExec(m.Prog, hybrid.DeviceOptions{Predictor: "mlp"})
	require.NoError(t, err)
	defer e.Close()
	pool := ops.NewPool(8)
	defer pool.Close()
	for _, tok := range []int{450, 2000, 31000} {
		cpu := m.Prog.NewSession(40, pool)
		cpu.SetPredictor(pred)
		dev := e.Program().NewSession(40, pool)
		next, same := tok, 0
		var worst float64 // largest |logit difference| over the vocabulary, any step
		for step := 0; step < 32; step++ {
			lc, err := cpu.Forward([]int{next}, false)
			require.NoError(t, err)
			lc1 := append([]float32(nil), lc.Data...)
			ld, err := dev.Forward([]int{next}, false)
			require.NoError(t, err)
			a, b := argmax(lc1), argmax(ld.Data)
			var diff, lo, hi float64
			lo, hi = math.Inf(1), math.Inf(-1)
			for i, v := range lc1 {
				diff = max(diff, math.Abs(float64(v-ld.Data[i])))
				lo, hi = min(lo, float64(v)), max(hi, float64(v))
			}
			worst = max(worst, diff)
			require.Less(t, diff, 0.01*(hi-lo), "token %d step %d: logits differ by %g over a spread of %g", tok, step, diff, hi-lo)
			if a == b {
				same++
			} else {
				gap := float64(lc1[a] - lc1[b])
				require.LessOrEqual(t, gap, 2*diff, "token %d step %d: the device picks %d, the CPU %d by a gap of %g", tok, step, b, a, gap)
			}
			next = a
		}
		t.Logf("from token %d: %d of 32 greedy picks agree; logits differ by at most %.3g", tok, same, worst)
	}
}

func argmax(x []float32) int {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return best
}
