package predictors

import (
	"path/filepath"
	"testing"

	"github.com/pinfer/pinfer/internal/fixtures"
	"github.com/stretchr/testify/require"
)

// The fixture's statistics (no "layer" fields) read in file order, and a
// written profile keeps layers in numeric order: 2 before 10.
func TestStatsOrderAndFixture(t *testing.T) {
	s, err := ReadStats(fixtures.Path(t, "shakespeare-relu-6m", "activation_stats.json"))
	require.NoError(t, err)
	require.Len(t, s.Layers, 6)
	for i, l := range s.Layers {
		require.Equal(t, i, l.Layer)
		require.Len(t, l.Frequency, 1024)
	}
	require.InDelta(t, 0.35765, s.Layers[0].MeanActiveFraction, 1e-6)

	out := &Stats{Tokens: 4}
	for _, k := range []struct{ layer, expert int }{{10, 0}, {2, 1}, {2, 0}, {1, 0}} {
		ls := NewLayerStats(k.layer, []int64{4, 2, 0, 0}, 4)
		ls.Expert = k.expert
		out.Layers = append(out.Layers, ls)
	}
	path := filepath.Join(t.TempDir(), "s.json")
	require.NoError(t, WriteStats(path, out))
	back, err := ReadStats(path)
	require.NoError(t, err)
	var order [][2]int
	for _, l := range back.Layers {
		order = append(order, [2]int{l.Layer, l.Expert})
	}
	require.Equal(t, [][2]int{{1, 0}, {2, 0}, {2, 1}, {10, 0}}, order)
	// Counts 4,2,0,0 over 4 tokens: rates 1, .5, 0, 0; mean 0.375; the first
	// neuron alone gives 4/6 of firings, so two are needed for 80%.
	l := back.Layers[0]
	require.Equal(t, []float32{1, 0.5, 0, 0}, l.Frequency)
	require.InDelta(t, 0.375, l.MeanActiveFraction, 1e-9)
	require.Equal(t, 2, l.NeuronsFor80)

	layers := []*Layer{{Index: 2, Expert: 1, NFF: 4}, {Index: 3, NFF: 4}}
	err = back.Attach(path, layers)
	require.ErrorContains(t, err, "no entry for layer 3")
	require.Equal(t, []float32{1, 0.5, 0, 0}, layers[0].Rates)
}
