package engine

import (
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pinfer/pinfer/ops"
	"github.com/pinfer/pinfer/ops/avx2"
	"github.com/pinfer/pinfer/synth"
)

// A dense run packs a q4_0 model's FFNs too (PackDense): gate and up for
// the packed mat-vec, down_t for the packed axpy, which rounds each
// sixteen rows' coef·d of a block to int8 with one scale as the row kernel
// (axpyQ4i16a) does and adds the groups in the same order (ops/avx2 holds
// both to float64 references). Decoding token by token, the path that
// reads the axpy copy, the logits are then the rows' (to the bit, here),
// where a wrong row or block moves them by a tenth of the largest.
func TestDensePackedMatchesRows(t *testing.T) {
	// The row axpy that shares the packed one's rounding is AVX2's; with
	// AVX-512 the rows' kernel rounds eight rows to a scale, not sixteen.
	// (ops' backend test holds both layouts at both levels to the
	// portable ops.)
	defer func(v bool) { avx2.AVX512 = v }(avx2.AVX512)
	avx2.AVX512 = false
	path := filepath.Join(t.TempDir(), "gen.gguf")
	// 544 columns: down_t's two whole chunks of 256 read as two runs,
	// then a chunk of one block (avx2.AxpyQ4x16).
	shape := synth.Shape{NEmbd: 544, NFF: 768, NLayer: 2, NHead: 4, NKVHead: 2, Vocab: 300, Rank: 64}
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
		// gate and up of each layer, and down_t's records
		require.Equal(t, 2*(2*768*544/32*18+avx2.Q4AxpyBytes(768, 544)), packed.dense.Bytes())
	}
	pool := ops.NewPool(2)
	defer pool.Close()
	r := rand.New(rand.NewPCG(3, 3))
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
		require.LessOrEqual(t, worst, 1e-5*scale, "position %d", pos)
	}
}
