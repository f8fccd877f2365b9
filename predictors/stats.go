package predictors

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
)

// Stats is a profile of neuron activations, in the JSON layout of the
// Shakespeare fixture's activation_stats.json: per layer, in numeric layer
// order, each neuron's activation frequency over Tokens tokens.
type Stats struct {
	Model  string       `json:"model,omitempty"`
	Tokens int          `json:"tokens"`
	Layers []LayerStats `json:"layers"`
}

// LayerStats is one layer's profile.
type LayerStats struct {
	Layer              int       `json:"layer"`
	Expert             int       `json:"expert,omitempty"` // inside a mixture of experts
	Tokens             int       `json:"tokens,omitempty"` // tokens this FFN saw (an expert sees only those routed to it)
	MeanActiveFraction float64   `json:"mean_active_fraction"`
	NeuronsFor80       int       `json:"neurons_for_80pct_of_activations"`
	Frequency          []float32 `json:"frequency"`

	entry int // 1 + the entry's position in the file ReadStats read; 0 if not read from one
}

// NewLayerStats summarises per-neuron activation counts over tokens.
func NewLayerStats(layer int, counts []int64, tokens int) LayerStats {
	ls := LayerStats{Layer: layer, Tokens: tokens, Frequency: make([]float32, len(counts))}
	var total int64
	for i, c := range counts {
		ls.Frequency[i] = float32(float64(c) / float64(max(tokens, 1)))
		total += c
	}
	if tokens > 0 && len(counts) > 0 {
		ls.MeanActiveFraction = float64(total) / float64(tokens) / float64(len(counts))
	}
	sorted := append([]int64(nil), counts...)
	sort.Slice(sorted, func(a, b int) bool { return sorted[a] > sorted[b] })
	var cum int64
	for i, c := range sorted {
		if float64(cum) >= 0.8*float64(total) {
			break
		}
		cum += c
		ls.NeuronsFor80 = i + 1
	}
	return ls
}

// layerKey names a profile's FFN: a layer, and an expert inside it.
type layerKey struct{ layer, expert int }

// ReadStats reads a profile. A file without "layer" fields (the fixture's)
// numbers its layers by position.
func ReadStats(path string) (*Stats, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var s Stats
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	if len(s.Layers) == 0 {
		// placement reads a profile without layers as a model without
		// sparse FFNs, whose FFNs it places whole.
		return nil, fmt.Errorf("%s: layers: none; a profile has the activation rates of at least one FFN (pinfer profile)", path)
	}
	unnumbered := true
	for i, l := range s.Layers {
		s.Layers[i].entry = i + 1
		unnumbered = unnumbered && l.Layer == 0 && l.Expert == 0
	}
	if unnumbered {
		for i := range s.Layers {
			s.Layers[i].Layer = i
		}
	}
	// Checked here, by the file's own positions, because placement and the
	// predictors take these numbers as they are.
	seen := map[layerKey]bool{}
	for i, l := range s.Layers {
		if l.Layer < 0 || l.Expert < 0 {
			return nil, fmt.Errorf("%s: layers[%d]: layer %d expert %d, want numbers >= 0", path, i, l.Layer, l.Expert)
		}
		k := layerKey{l.Layer, l.Expert}
		if seen[k] {
			return nil, fmt.Errorf("%s: layers[%d]: layer %d expert %d appears twice", path, i, l.Layer, l.Expert)
		}
		seen[k] = true
		for j, f := range l.Frequency {
			if !(f >= 0 && f <= 1) {
				return nil, fmt.Errorf("%s: layers[%d].frequency[%d]: %v, want a fraction in [0, 1]", path, i, j, f)
			}
		}
	}
	sortLayers(s.Layers)
	return &s, nil
}

// WriteStats writes a profile with its layers in numeric order.
func WriteStats(path string, s *Stats) error {
	sortLayers(s.Layers)
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// Attach gives each layer its profiled rates; the neuron counts must agree.
// An error names the entry by its position in the file (ReadStats sorts the
// entries; a Stats not read from a file is named by its position in Layers)
// and by its layer and expert.
func (s *Stats) Attach(path string, layers []*Layer) error {
	byIndex := map[layerKey]int{}
	for i, ls := range s.Layers {
		byIndex[layerKey{ls.Layer, ls.Expert}] = i
	}
	for _, l := range layers {
		i, ok := byIndex[layerKey{l.Index, l.Expert}]
		if !ok {
			return fmt.Errorf("%s: layers: no entry for layer %d expert %d", path, l.Index, l.Expert)
		}
		ls := &s.Layers[i]
		if len(ls.Frequency) != l.NFF {
			if ls.entry > 0 {
				i = ls.entry - 1
			}
			return fmt.Errorf("%s: layers[%d].frequency: layer %d expert %d has %d neurons, the model has %d", path, i, ls.Layer, ls.Expert, len(ls.Frequency), l.NFF)
		}
		l.Rates = ls.Frequency
	}
	return nil
}

// sortLayers keeps layers in numeric order (and experts within a layer):
// PowerInfer's exporter sorted them as text, putting 10 before 2.
func sortLayers(ls []LayerStats) {
	sort.SliceStable(ls, func(a, b int) bool {
		if ls[a].Layer != ls[b].Layer {
			return ls[a].Layer < ls[b].Layer
		}
		return ls[a].Expert < ls[b].Expert
	})
}
