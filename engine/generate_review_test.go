package engine

import (
	"testing"

	"github.com/pinfer/pinfer/models"
	"github.com/pinfer/pinfer/ops"
	"github.com/pinfer/pinfer/predictors"
	"github.com/pinfer/pinfer/sample"
	"github.com/stretchr/testify/require"
)

// noneFire predicts that no neuron of any layer fires.
type noneFire struct{}

func (noneFire) Name() string { return "none" }
func (noneFire) Predict(*predictors.Layer, predictors.Input, []int32) []int32 {
	return []int32{}
}

// Result.Stats say what one generation's sparse FFNs did, on a kept
// session as on a new one: a turn whose predictor computes no neuron
// reports none, whatever the turn before it computed (they were the
// session's runner's totals since it was made, so the dense first turn's
// neurons showed in the second's fractions).
func TestKeptSessionStatsArePerCallReview(t *testing.T) {
	path, err := models.DefaultModelPath()
	require.NoError(t, err)
	m, err := Load(path, "")
	require.NoError(t, err)
	defer m.Close()
	pool := ops.NewPool(2)
	defer pool.Close()
	sess := m.NewSession(m.Context(0), pool)
	greedy := sample.Params{Temp: 0, RepeatPenalty: 1}

	res, err := m.Generate(Options{Prompt: "ROMEO: what news?", N: 4, Sample: greedy, Session: sess})
	require.NoError(t, err)
	require.NotNil(t, res.Stats)
	for k, f := range res.Stats.ActiveFraction {
		require.Equal(t, 1.0, f, "layer %d: dense computes every neuron", k)
	}

	res, err = m.Generate(Options{Prompt: "ROMEO: what news? Speak.", N: 4, Sample: greedy, Session: sess, Predictor: noneFire{}})
	require.NoError(t, err)
	require.Equal(t, "none", res.Stats.Predictor)
	for k, f := range res.Stats.ActiveFraction {
		require.Equal(t, 0.0, f, "layer %d: this call computed no neuron", k)
	}
}
