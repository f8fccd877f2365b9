package predictors

import (
	"os"
	"path/filepath"
	"strings"
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

// A profile whose numbers placement and the predictors cannot take is
// refused by name, at the entry's place in the file.
func TestStatsRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.json")
	for body, want := range map[string]string{
		`{"layers": [{"layer": 1, "frequency": [0.5]}, {"layer": 1, "frequency": [0.1]}]}`: "layers[1]: layer 1 expert 0 appears twice",
		`{"layers": [{"layer": 1, "frequency": [0.5, 1.5]}]}`:                              "layers[0].frequency[1]: 1.5, want a fraction in [0, 1]",
		`{"layers": [{"layer": 1, "frequency": [-0.25]}]}`:                                 "layers[0].frequency[0]: -0.25",
		`{"layers": [{"layer": -2, "frequency": [0]}]}`:                                    "layers[0]: layer -2 expert 0, want numbers >= 0",
		`{"layers": [{"layer": 3, "frequency": [0]}`:                                       "unexpected end of JSON input",
		`{"tokens": 5, "layers": []}`:                                                      "layers: none",
		`{}`:                                                                               "layers: none",
	} {
		require.NoError(t, os.WriteFile(path, []byte(body), 0o644))
		_, err := ReadStats(path)
		require.ErrorContains(t, err, path+": ", body)
		require.ErrorContains(t, err, want, body)
	}
}

// FuzzStats: any profile either fails with one line naming the file, or
// attaches to FFNs of its own shape with every rate a fraction.
func FuzzStats(f *testing.F) {
	real, err := os.ReadFile(fixtures.Path(f, "shakespeare-relu-6m", "activation_stats.json"))
	require.NoError(f, err)
	f.Add(real)
	f.Add([]byte(`{"tokens": 4, "layers": [{"layer": 2, "expert": 1, "frequency": [1, 0.5, 0, 0]}, {"layer": 1, "frequency": [0]}]}`))
	f.Add([]byte(`{"layers": [{"frequency": [0.5]}, {"frequency": [2]}]}`))
	path := filepath.Join(f.TempDir(), "s.json")
	f.Fuzz(func(t *testing.T, data []byte) {
		require.NoError(t, os.WriteFile(path, data, 0o644))
		s, err := ReadStats(path)
		if err != nil {
			if msg := err.Error(); !strings.HasPrefix(msg, path+": ") || strings.ContainsAny(msg, "\n\r") {
				t.Fatalf("error is not one line naming the file: %q", msg)
			}
			return
		}
		var layers []*Layer
		for _, l := range s.Layers {
			layers = append(layers, &Layer{Index: l.Layer, Expert: l.Expert, NFF: len(l.Frequency)})
		}
		require.NoError(t, s.Attach(path, layers))
		for _, l := range layers {
			for _, r := range l.Rates {
				if !(r >= 0 && r <= 1) {
					t.Fatalf("layer %d expert %d: rate %v", l.Index, l.Expert, r)
				}
			}
		}
	})
}
