package train

import (
	"fmt"

	"github.com/pinfer/pinfer/engine"
)

// Config is a whole training run.
type Config struct {
	Options
	Ctx       int // window in tokens for collecting hidden states (0: 512)
	MaxTokens int // text tokens to collect (0: all)
	// Collected, if set, is told the tokens run so far while collecting.
	Collected func(done, total int)
}

// Train collects m's hidden states over tokens, fits every layer's
// predictor and writes m's file with them to out.
func Train(m *engine.Model, tokens []int, out string, c Config) ([]Report, error) {
	if c.MaxTokens > 0 && len(tokens) > c.MaxTokens {
		tokens = tokens[:c.MaxTokens]
	}
	if c.Ctx == 0 {
		c.Ctx = 512
	}
	data, err := Collect(m, tokens, c.Ctx, c.Pool, c.Collected)
	if err != nil {
		return nil, err
	}
	nets, reps, err := Fit(data, c.Options)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", m.Path, err)
	}
	var at []Target
	for _, d := range data {
		at = append(at, Target{Block: d.Layer.Index, Expert: d.Layer.Expert, Experts: d.Experts})
	}
	return reps, Write(m.File, nets, at, out, nil)
}
