package engine

import (
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pinfer/pinfer/ops"
	"github.com/pinfer/pinfer/ops/avx2"
	"github.com/pinfer/pinfer/synth"
)

// A dense run packs a q4_0 model's FFNs too (PackDense): gate and up for
// the packed mat-vec, down_t for the packed axpy, which rounds each eight
// rows' coef·d of a block to int8 with one scale where the row kernel
// (axpyQ4i16a) takes sixteen rows a scale (ops/avx2 holds both to float64
// references). Decoding token by token, the path that reads the axpy copy,
// the logits stay the rows' within that rounding, far below what a wrong
// row or block would move them.
func TestDensePackedMatchesRows(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gen.gguf")
	shape := synth.Shape{NEmbd: 256, NFF: 768, NLayer: 2, NHead: 4, NKVHead: 2, Vocab: 300, Rank: 64}
	require.NoError(t, synth.Write(path, synth.Options{Shape: shape, Active: 0.3, Type: ops.Q4_0, Seed: 3}, nil))
	rows, err := Load(path, "")
	require.NoError(t, err)
	defer rows.Close()
	packed, err := Load(path, "")
	require.NoError(t, err)
	defer packed.Close()
	_, err = packed.Predictor("dense")
	require.NoError(t, err)
	packed.WaitPacked()
	require.Equal(t, rows.Repacked(), packed.Repacked()-packed.dense.Bytes())
	if avx2.PackPays() && ops.Fast {
		// gate, up and down_t of each layer
		require.Equal(t, 2*3*768*256/32*18, packed.dense.Bytes())
	}
	pool := ops.NewPool(2)
	defer pool.Close()
	r := rand.New(rand.NewPCG(3, 3))
	var rel []float64
	a, b := rows.NewSession(64, pool), packed.NewSession(64, pool)
	for pos := range 48 {
		id := r.IntN(shape.Vocab)
		la, err := a.Forward([]int{id}, false)
		require.NoError(t, err)
		lb, err := b.Forward([]int{id}, false)
		require.NoError(t, err)
		var worst, scale float64
		for i, v := range la.Data {
			scale = max(scale, math.Abs(float64(v)))
			worst = max(worst, math.Abs(float64(lb.Data[i]-v)))
		}
		require.Less(t, worst, 3e-2*scale, "position %d", pos)
		rel = append(rel, worst/scale)
	}
	slices.Sort(rel)
	t.Logf("largest logit difference, of the largest logit: median %.2g, worst %.2g", rel[len(rel)/2], rel[len(rel)-1])
	require.Less(t, rel[len(rel)/2], 5e-3, "the median position's")
}
