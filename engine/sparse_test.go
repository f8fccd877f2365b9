package engine

import (
	"math"
	"testing"

	"github.com/pinfer/pinfer/ops"
	"github.com/pinfer/pinfer/predictors"
	"github.com/pinfer/pinfer/sample"
	"github.com/stretchr/testify/require"
)

// With the oracle, the sparse FFN computes exactly the neurons that fire, so
// sparse and dense runs agree: same 64 greedy ids, logits within 1e-4.
func TestOracleSparseMatchesDense(t *testing.T) {
	ref := loadShakespeareRef(t)
	m, err := Load(shakespeareGGUF(t, ops.F32), "")
	require.NoError(t, err)
	defer m.Close()
	oracle, err := m.Predictor("oracle")
	require.NoError(t, err)
	for _, p := range ref.Prompts {
		opt := Options{Prompt: p.Text, N: 64, Threads: 2, Sample: sample.Params{Temp: 0}}
		dense, err := m.Generate(opt)
		require.NoError(t, err)
		opt.Predictor = oracle
		sparse, err := m.Generate(opt)
		require.NoError(t, err)
		require.Equal(t, dense.Tokens, sparse.Tokens, "prompt %q", p.Text)
		require.Equal(t, p.GreedyIDs, sparse.Tokens, "prompt %q", p.Text)
		var worst float64
		for i := range dense.LastLogits {
			worst = math.Max(worst, math.Abs(float64(dense.LastLogits[i]-sparse.LastLogits[i])))
		}
		require.Less(t, worst, 1e-4, "prompt %q", p.Text)
		// The oracle really skipped neurons: the fixture fires 16-36% per layer.
		require.Len(t, sparse.Stats.ActiveFraction, 6)
		for l, f := range sparse.Stats.ActiveFraction {
			require.Greater(t, f, 0.05, "layer %d", l)
			require.Less(t, f, 0.6, "layer %d", l)
		}
		require.Equal(t, "oracle", sparse.Stats.Predictor)
	}
}

// Logits of every position, sparse (oracle) against dense, on a longer text.
func TestOracleAllPositions(t *testing.T) {
	m, err := Load(shakespeareGGUF(t, ops.F32), "")
	require.NoError(t, err)
	defer m.Close()
	ids := m.Encode("First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak.")
	dense := m.NewSession(128, nil)
	want, err := dense.Forward(ids, true)
	require.NoError(t, err)
	wantData := append([]float32(nil), want.Data...)
	sparse := m.NewSession(128, nil)
	sparse.SetPredictor(&predictors.Oracle{})
	got, err := sparse.Forward(ids, true)
	require.NoError(t, err)
	require.InDeltaSlice(t, wantData, got.Data, 1e-4)
}
