package predictors

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/pinfer/pinfer/internal/fixtures"
	"github.com/stretchr/testify/require"
)

// fixtureRates reads activation_stats.json (rates measured in PyTorch) on
// its own, without ReadStats: the reference the static sets are held to.
func fixtureRates(t *testing.T) [][]float64 {
	b, err := os.ReadFile(fixtures.Path(t, "shakespeare-relu-6m", "activation_stats.json"))
	require.NoError(t, err)
	var raw struct {
		Layers []struct {
			Frequency []float64 `json:"frequency"`
		} `json:"layers"`
	}
	require.NoError(t, json.Unmarshal(b, &raw))
	var rates [][]float64
	for _, l := range raw.Layers {
		rates = append(rates, l.Frequency)
	}
	return rates
}

// The static predictor keeps, per layer, exactly the neurons whose fixture
// rate is at least its floor: 5% by default, which on this model's flat
// rates (the rarest neuron of a layer fires for 3.2-12.7% of tokens) is
// 1019-1024 of 1024 neurons a layer; "static:RATE" sets the floor.
func TestStaticSetsFollowFixtureRates(t *testing.T) {
	rates := fixtureRates(t)
	require.Len(t, rates, 6)
	path := fixtures.Path(t, "shakespeare-relu-6m", "activation_stats.json")
	s, err := ReadStats(path)
	require.NoError(t, err)
	var layers []*Layer
	for i := range rates {
		layers = append(layers, &Layer{Index: i, NFF: 1024})
	}
	require.NoError(t, s.Attach(path, layers))
	for _, c := range []struct {
		name  string
		floor float64
		kept  []int // neurons kept per layer, counted from the fixture by hand
	}{
		{"static", 0.05, []int{1024, 1023, 1019, 1023, 1020, 1024}},
		{"static:0.05", 0.05, []int{1024, 1023, 1019, 1023, 1020, 1024}},
		{"static:0.2", 0.2, []int{904, 357, 259, 409, 395, 934}},
		{"static:0.5", 0.5, []int{168, 0, 0, 0, 2, 12}},
		{"static:0", 0, []int{1024, 1024, 1024, 1024, 1024, 1024}},
	} {
		p, err := New(c.name, layers)
		require.NoError(t, err, c.name)
		require.Equal(t, "static", p.Name())
		require.InDelta(t, c.floor, p.(*Static).MinRate, 1e-7, c.name)
		for i, l := range layers {
			want := []int32{}
			for j, r := range rates[i] {
				if r >= c.floor {
					want = append(want, int32(j))
				}
			}
			got := p.Predict(l, Input{}, nil)
			require.Equal(t, want, got, "%s layer %d", c.name, i)
			require.Len(t, got, c.kept[i], "%s layer %d", c.name, i)
		}
	}
}

// A floor that is not a firing rate is refused by name.
func TestStaticRateRefused(t *testing.T) {
	l := &Layer{Index: 0, NFF: 2, Rates: []float32{0.5, 0.01}}
	for _, name := range []string{"static:", "static:x", "static:-0.1", "static:1.5", "static:NaN", "static:inf"} {
		_, err := New(name, []*Layer{l})
		require.ErrorContains(t, err, strconv.Quote(name)+": want static:RATE, RATE a firing rate in [0, 1] (static alone is static:0.05)", name)
	}
	_, err := NewStaticMinRate([]*Layer{l}, -1)
	require.ErrorContains(t, err, "minimum rate -1, want a firing rate in [0, 1]")
	p, err := New("static:0.01", []*Layer{l})
	require.NoError(t, err)
	require.Equal(t, []int32{0, 1}, p.Predict(l, Input{}, nil))
	_, err = New("static:0.5", []*Layer{{Index: 3, NFF: 2}})
	require.ErrorContains(t, err, "layer 3 has no activation statistics")
}

// Attach names a profile entry whose neuron count disagrees with the model
// by its position in the file, not by its layer number (ReadStats sorts the
// entries, so neither the layer nor the sorted position is the file's).
func TestAttachNamesFilePosition(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.json")
	require.NoError(t, os.WriteFile(path, []byte(`{"tokens": 4, "layers": [
		{"layer": 7, "frequency": [0.5, 0.5]},
		{"layer": 2, "frequency": [0.5, 0.5]},
		{"layer": 5, "frequency": [0.5]}
	]}`), 0o644))
	s, err := ReadStats(path)
	require.NoError(t, err)
	layers := []*Layer{{Index: 2, NFF: 2}, {Index: 5, NFF: 2}, {Index: 7, NFF: 2}}
	err = s.Attach(path, layers)
	require.EqualError(t, err, path+": layers[2].frequency: layer 5 expert 0 has 1 neurons, the model has 2")

	// A profile made in memory is named by its position in Layers.
	mem := &Stats{Layers: []LayerStats{{Layer: 3, Frequency: []float32{1}}, {Layer: 1, Frequency: []float32{1, 0, 0}}}}
	err = mem.Attach("mem", []*Layer{{Index: 1, NFF: 2}})
	require.EqualError(t, err, "mem: layers[1].frequency: layer 1 expert 0 has 3 neurons, the model has 2")
}
