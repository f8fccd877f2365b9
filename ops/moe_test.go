package ops

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"
)

// stacked makes a 3-D weight {cols, rows, n} of random values and returns
// them in float64 as [expert][row][col].
func stacked(t *testing.T, r *rand.Rand, dt DType, name string, cols, rows, n int) (*Weight, [][][]float64) {
	m, ref := randMatrix(t, r, dt, rows*n, cols)
	out := make([][][]float64, n)
	for e := range out {
		out[e] = ref[e*rows : (e+1)*rows]
	}
	return &Weight{Name: name, Dims: []int{cols, rows, n}, M: m}, out
}

func matVec64(w [][]float64, x []float64) []float64 {
	out := make([]float64, len(w))
	for i, row := range w {
		for j, v := range row {
			out[i] += v * x[j]
		}
	}
	return out
}

// moeRef is Mixtral's block computed in float64 straight from its definition.
func moeRef(x []float64, router [][]float64, gate, up, down [][][]float64, k int, act func(float64) float64) []float64 {
	logits := matVec64(router, x)
	mx := math.Inf(-1)
	for _, l := range logits {
		mx = math.Max(mx, l)
	}
	p := make([]float64, len(logits))
	var z float64
	for i, l := range logits {
		p[i] = math.Exp(l - mx)
		z += p[i]
	}
	idx := make([]int, len(p))
	for i := range idx {
		idx[i] = i
		p[i] /= z
	}
	sort.Slice(idx, func(a, b int) bool { return p[idx[a]] > p[idx[b]] })
	var sum float64
	for _, e := range idx[:k] {
		sum += p[e]
	}
	out := make([]float64, len(x))
	for _, e := range idx[:k] {
		g, u := matVec64(gate[e], x), matVec64(up[e], x)
		for i := range g {
			g[i] = act(g[i]) * u[i]
		}
		for i, v := range matVec64(down[e], g) {
			out[i] += p[e] / sum * v
		}
	}
	return out
}

func TestMoEMatchesFloat64(t *testing.T) {
	const d, ff, nE, k, T = 32, 64, 4, 2, 5
	acts := map[string]func(float64) float64{
		"relu": func(v float64) float64 { return math.Max(v, 0) },
		"silu": func(v float64) float64 { return v / (1 + math.Exp(-v)) },
	}
	for _, dt := range []DType{F32, Q8_0} {
		for name, act := range acts {
			r := rand.New(rand.NewPCG(7, uint64(dt)))
			rm, router := randMatrix(t, r, dt, nE, d)
			gw, gate := stacked(t, r, dt, "gate", d, ff, nE)
			uw, up := stacked(t, r, dt, "up", d, ff, nE)
			dw, down := stacked(t, r, dt, "down", ff, d, nE)
			w := []*Weight{{Name: "router", Dims: []int{d, nE}, M: rm}, gw, uw, dw}
			x := &Tensor{Rows: T, Cols: d, Data: make([]float32, T*d)}
			for i := range x.Data {
				x.Data[i] = float32(r.NormFloat64())
			}
			out, err := runOp(t, "moe", Attrs{"n_expert_used": k, "act": name}, w, x)
			require.NoError(t, err)
			for tk := 0; tk < T; tk++ {
				x64 := make([]float64, d)
				for i, v := range x.Row(tk) {
					x64[i] = float64(v)
				}
				want := moeRef(x64, router, gate, up, down, k, act)
				for i, v := range want {
					require.InDelta(t, v, float64(out.Row(tk)[i]), 1e-3*(1+math.Abs(v)), "%s %s token %d [%d]", dt, name, tk, i)
				}
			}
		}
	}
}

func TestMoEShapeErrors(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	rm, _ := randMatrix(t, r, F32, 4, 32)
	gw, _ := stacked(t, r, F32, "blk.0.ffn_gate_exps.weight", 32, 8, 4)
	uw, _ := stacked(t, r, F32, "blk.0.ffn_up_exps.weight", 32, 8, 4)
	dw, _ := stacked(t, r, F32, "blk.0.ffn_down_exps.weight", 8, 32, 4)
	bad, _ := stacked(t, r, F32, "blk.0.ffn_down_exps.weight", 32, 8, 4)
	router := &Weight{Name: "blk.0.ffn_gate_inp.weight", Dims: []int{32, 4}, M: rm}
	x := &Tensor{Rows: 1, Cols: 32, Data: make([]float32, 32)}
	_, err := runOp(t, "moe", Attrs{"n_expert_used": 5, "act": "relu"}, []*Weight{router, gw, uw, dw}, x)
	require.ErrorContains(t, err, "n_expert_used 5: want 1 to the 4 experts")
	_, err = runOp(t, "moe", Attrs{"n_expert_used": 2, "act": "relu"}, []*Weight{router, gw, uw, bad}, x)
	require.ErrorContains(t, err, "down blk.0.ffn_down_exps.weight has dims [32 8 4]: want [8 32 4]")
	_, err = runOp(t, "moe", Attrs{"n_expert_used": 2, "act": "relu"}, []*Weight{router, gw, uw, dw}, &Tensor{Rows: 1, Cols: 16, Data: make([]float32, 16)})
	require.ErrorContains(t, err, "router blk.0.ffn_gate_inp.weight has dims [32 4]: want {16, n_expert}")
}

// The experts' stacked predictors: fc1 {d, R, n} and fc2 {R, ff, n} slice
// into one FC1 (R rows of d) and FC2 (ff rows of R) per expert.
func TestMoEPredictorSlots(t *testing.T) {
	const d, ff, nE, R = 32, 8, 4, 6
	r := rand.New(rand.NewPCG(3, 3))
	rm, _ := randMatrix(t, r, F32, nE, d)
	router := &Weight{Name: "router", Dims: []int{d, nE}, M: rm}
	gw, _ := stacked(t, r, F32, "gate", d, ff, nE)
	uw, _ := stacked(t, r, F32, "up", d, ff, nE)
	dw, _ := stacked(t, r, F32, "down", ff, d, nE)
	f1, fc1 := stacked(t, r, F32, "blk.0.ffn_fc1_exps.weight", d, R, nE)
	f2, fc2 := stacked(t, r, F32, "blk.0.ffn_fc2_exps.weight", R, ff, nE)
	op, _ := Lookup("moe")
	a := Attrs{"n_expert_used": 2, "act": "relu", "norm_topk": true, "pred_threshold": 0.25}
	shape := func(w ...*Weight) error {
		_, err := op.Shape(&ShapeArgs{In: []int{d}, W: w, A: a})
		return err
	}
	require.NoError(t, shape(router, gw, uw, dw, nil, nil))
	require.NoError(t, shape(router, gw, uw, dw, f1, f2))
	require.ErrorContains(t, shape(router, gw, uw, dw, f1, nil), "needs both fc1 and fc2")
	require.ErrorContains(t, shape(router, gw, uw, dw, f2, f2), "fc1 blk.0.ffn_fc2_exps.weight has dims [6 8 4]: want {32, rank, 4}")
	short, _ := stacked(t, r, F32, "blk.0.ffn_fc2_exps.weight", R-1, ff, nE)
	require.ErrorContains(t, shape(router, gw, uw, dw, f1, short), "fc2 blk.0.ffn_fc2_exps.weight has dims [5 8 4]: want [6 8 4]")

	ffns := op.FFNs([]*Weight{router, gw, uw, dw, f1, f2}, a)
	require.Len(t, ffns, nE)
	row := make([]float32, d)
	for e, f := range ffns {
		require.Equal(t, R, f.FC1.Rows)
		require.Equal(t, d, f.FC1.Cols)
		require.Equal(t, ff, f.FC2.Rows)
		require.Equal(t, R, f.FC2.Cols)
		require.Equal(t, float32(0.25), f.PredCut)
		f.FC1.RowF32(R-1, row)
		require.InDelta(t, fc1[e][R-1][d-1], float64(row[d-1]), 1e-6)
		f.FC2.RowF32(ff-1, row[:R])
		require.InDelta(t, fc2[e][ff-1][0], float64(row[0]), 1e-6)
	}
	require.Nil(t, op.FFNs([]*Weight{router, gw, uw, dw, nil, nil}, a)[0].FC1)
}
