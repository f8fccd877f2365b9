package predictors

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/pinfer/pinfer/ops"
	"github.com/stretchr/testify/require"
)

// The mlp predictor's prefill form (two mat-mats for all tokens) chooses
// what its one-token form chooses, and both hold to the scores computed in
// float64 from the dequantized fc1 and fc2, wherever a score is clear of
// the cut by more than the weights' and activations' rounding.
func TestMLPPredictRows(t *testing.T) {
	const d, rank, nff, T = 256, 128, 512, 11
	r := rand.New(rand.NewPCG(3, 4))
	rnd := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(r.NormFloat64())
		}
		return v
	}
	for _, dt := range []ops.DType{ops.F32, ops.Q4_0} {
		t.Run(fmt.Sprint(dt), func(t *testing.T) {
			mat := func(rows, cols int) (*ops.Matrix, []float32) {
				v := rnd(rows * cols)
				rb, err := dt.RowBytes(cols)
				require.NoError(t, err)
				b := make([]byte, rb*rows)
				require.NoError(t, ops.Quantize(dt, b, v))
				require.NoError(t, ops.Dequantize(dt, v, b))
				m, err := ops.NewMatrix(dt, rows, cols, b)
				require.NoError(t, err)
				return m, v
			}
			fc1, w1 := mat(rank, d)
			fc2, w2 := mat(nff, rank)
			l := &Layer{NEmbd: d, NFF: nff, Act: "relu", FC1: fc1, FC2: fc2, PredCut: 0.5}
			resid := rnd(T * d)
			pool := ops.NewPool(2)
			defer pool.Close()
			batch := (&MLP{}).PredictRows(l, Rows{Resid: resid, Normed: resid, T: T, Pool: pool}, nil)
			require.Len(t, batch, T)
			one := &MLP{}
			for tt := range T {
				x := resid[tt*d : (tt+1)*d]
				require.Equal(t, one.Predict(l, Input{Resid: x, Normed: x, Pool: pool}, nil), batch[tt], "token %d", tt)
				ref, peak := mlpRef(w1, w2, x, rank, nff)
				in := map[int32]bool{}
				for _, i := range batch[tt] {
					in[i] = true
				}
				margin := 1e-4 * peak
				if dt == ops.Q4_0 {
					margin = 0.05 * peak // x and h quantized to q8 on the way
				}
				checked := 0
				for i, s := range ref {
					if math.Abs(s-0.5) > margin {
						require.Equal(t, s > 0.5, in[int32(i)], "token %d neuron %d: score %g", tt, i, s)
						checked++
					}
				}
				require.Greater(t, checked, nff/2)
			}
		})
	}
}

// mlpRef is relu(fc1·x)·fc2 in float64, and the largest |score|.
func mlpRef(w1, w2, x []float32, rank, nff int) ([]float64, float64) {
	d := len(x)
	h := make([]float64, rank)
	for j := range h {
		for k := range d {
			h[j] += float64(w1[j*d+k]) * float64(x[k])
		}
		h[j] = max(h[j], 0)
	}
	s := make([]float64, nff)
	peak := 0.0
	for i := range s {
		for j := range rank {
			s[i] += float64(w2[i*rank+j]) * h[j]
		}
		peak = max(peak, math.Abs(s[i]))
	}
	return s, peak
}
