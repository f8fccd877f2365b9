package profile

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/pinfer/pinfer/engine"
	"github.com/pinfer/pinfer/ops"
	"github.com/pinfer/pinfer/predictors"
)

// Options for a profile run.
type Options struct {
	Ctx       int // window in tokens; 0: the model's context, at most 512
	MaxTokens int // stop after this many text tokens; 0: the whole text
	Pool      *ops.Pool
	Progress  func(done, total int)
}

// Run profiles text: it runs with the oracle predictor, whose chosen
// neurons are exactly those whose real gate passes the activation, and
// counts them per layer and neuron.
func Run(m *engine.Model, text string, opt Options) (*predictors.Stats, error) {
	return RunTokens(m, m.Encode(text), opt)
}

// RunTokens is Run on a text already encoded.
func RunTokens(m *engine.Model, tokens []int, opt Options) (*predictors.Stats, error) {
	if opt.MaxTokens > 0 && len(tokens) > opt.MaxTokens {
		tokens = tokens[:opt.MaxTokens]
	}
	if len(m.Prog.Layers) == 0 {
		return nil, fmt.Errorf("%s: the model has no sparse FFN layers to profile", m.Path)
	}
	// BOS alone is no text: stats from it would say nothing of the model.
	if len(tokens) == 0 || len(tokens) == 1 && tokens[0] == m.Tok.BOS() {
		return nil, fmt.Errorf("no tokens to profile besides BOS; give a longer calibration text")
	}
	nctx := opt.Ctx
	if nctx <= 0 {
		nctx = min(max(m.ContextLength(), 2), 512)
	}
	// No window is longer than the text: a context asked larger (-c) would
	// only size the KV cache for positions that never come.
	if nctx > len(tokens) {
		nctx = max(len(tokens), 2)
	}
	// Keyed by the layer itself: the experts of a mixture share a block index.
	counts := map[*predictors.Layer][]int64{}
	seen := map[*predictors.Layer]int{}
	for _, l := range m.Prog.Layers {
		counts[l] = make([]int64, l.NFF)
	}
	observe := func(l *predictors.Layer, _ predictors.Input, active []int32) {
		c := counts[l]
		seen[l]++
		for _, i := range active {
			c[i]++
		}
	}
	if _, err := Walk(m, tokens, nctx, opt.Pool, &predictors.Oracle{}, observe, opt.Progress); err != nil {
		return nil, err
	}
	s := &predictors.Stats{Model: m.Path}
	for _, l := range m.Prog.Layers {
		ls := predictors.NewLayerStats(l.Index, counts[l], seen[l])
		ls.Expert = l.Expert
		s.Layers = append(s.Layers, ls)
		s.Tokens = max(s.Tokens, seen[l])
	}
	sort.SliceStable(s.Layers, func(a, b int) bool { return s.Layers[a].Layer < s.Layers[b].Layer })
	return s, nil
}

// Summary prints one line per layer: the active fraction and the share of
// neurons that give 80% of all activations.
func Summary(w io.Writer, s *predictors.Stats) {
	fmt.Fprintf(w, "%d tokens profiled\n", s.Tokens)
	fmt.Fprintf(w, "%5s  %8s  %16s  %s\n", "layer", "active", "80% of firings", "")
	for _, l := range s.Layers {
		n := max(len(l.Frequency), 1)
		share := float64(l.NeuronsFor80) / float64(n)
		bar := strings.Repeat("#", int(l.MeanActiveFraction*40+0.5))
		fmt.Fprintf(w, "%5d  %7.2f%%  %5.1f%% (%5d/%d)  %s\n", l.Layer, 100*l.MeanActiveFraction, 100*share, l.NeuronsFor80, n, bar)
	}
}
