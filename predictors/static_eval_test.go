package predictors_test

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/pinfer/pinfer/engine"
	"github.com/pinfer/pinfer/internal/fixtures"
	"github.com/pinfer/pinfer/models"
	"github.com/pinfer/pinfer/ops"
	"github.com/pinfer/pinfer/train"
	"github.com/stretchr/testify/require"
)

// What `pinfer predictor eval --predictor static --stats activation_stats.json`
// reports on the built-in model agrees with the rates PyTorch measured
// (activation_stats.json counts 2,048 validation tokens; here, the first
// 1,024 tokens of heldout.txt in windows of 128). A fixed set's share of neurons per token is its size, exactly; its
// recall on text like the profile's is the kept neurons' share of all
// firings, sum of kept rates / sum of rates; its precision is their mean
// rate. At the default floor (5%) that is 99.5-100% of neurons, recall
// >= 0.998: the static predictor saves almost nothing on this model, because
// no neuron fires for fewer than 3.2% of tokens. At static:0.2 layer 0
// (whose input no earlier FFN choice changes) keeps 88% for recall 0.945.
func TestStaticEvalAgreesWithFixtureRates(t *testing.T) {
	statsPath := fixtures.Path(t, "shakespeare-relu-6m", "activation_stats.json")
	b, err := os.ReadFile(statsPath)
	require.NoError(t, err)
	var raw struct {
		Layers []struct {
			Frequency []float64 `json:"frequency"`
		} `json:"layers"`
	}
	require.NoError(t, json.Unmarshal(b, &raw))
	path, err := models.DefaultModelPath()
	require.NoError(t, err)
	m, err := engine.Load(path, "")
	require.NoError(t, err)
	defer m.Close()
	require.NoError(t, m.AttachStats(statsPath))
	text, err := os.ReadFile(fixtures.Path(t, "shakespeare-relu-6m", "heldout.txt"))
	require.NoError(t, err)
	tokens := m.Encode(string(text))[:1024]
	pool := ops.NewPool(2)
	defer pool.Close()

	for _, c := range []struct {
		name   string
		floor  float64
		layers int // layers whose recall and precision are compared
	}{
		{"static", 0.05, 6},
		// Later layers see the hidden states a skipped FFN changed.
		{"static:0.2", 0.2, 1},
	} {
		p, err := m.Predictor(c.name)
		require.NoError(t, err)
		e, err := train.Evaluate(m, p, tokens, 128, pool, nil)
		require.NoError(t, err)
		require.Len(t, e.Layers, len(raw.Layers))
		for i, r := range e.Layers {
			rates := raw.Layers[i].Frequency
			var kept, keptSum, sum float64
			for _, f := range rates {
				sum += f
				if f >= c.floor {
					kept++
					keptSum += f
				}
			}
			t.Logf("%s layer %d: predicted %.4f (fixture %.4f), recall %.4f (fixture %.4f), precision %.4f (fixture %.4f)",
				c.name, i, r.Predicted, kept/float64(len(rates)), r.Recall, keptSum/sum, r.Precision, keptSum/max(kept, 1))
			require.InDelta(t, kept/float64(len(rates)), r.Predicted, 1e-9, "%s layer %d", c.name, i)
			if i >= c.layers {
				continue
			}
			require.InDelta(t, keptSum/sum, r.Recall, 0.03, "%s layer %d recall", c.name, i)
			require.InDelta(t, keptSum/max(kept, 1), r.Precision, 0.03, "%s layer %d precision", c.name, i)
			if c.floor == 0.05 {
				require.GreaterOrEqual(t, r.Predicted, 0.995, "layer %d", i)
				require.GreaterOrEqual(t, r.Recall, 0.998, "layer %d", i)
			}
		}
	}
}
