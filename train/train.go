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

// Check refuses a window or token count below 0 and the Options' own
// faults, before any tokens are run.
func (c *Config) Check() error {
	if c.Ctx < 0 {
		return fmt.Errorf("-c %d: want a window size, or 0 for 512", c.Ctx)
	}
	if c.MaxTokens < 0 {
		return fmt.Errorf("--max-tokens %d: want a count, or 0 for the whole text", c.MaxTokens)
	}
	return c.Options.Check()
}

// Train collects m's hidden states over tokens, fits every layer's
// predictor and writes m's file with them to out.
func Train(m *engine.Model, tokens []int, out string, c Config) ([]Report, error) {
	if err := c.Check(); err != nil {
		return nil, err
	}
	if c.MaxTokens > 0 && len(tokens) > c.MaxTokens {
		tokens = tokens[:c.MaxTokens]
	}
	if c.Ctx == 0 {
		c.Ctx = 512
	}
	// No window is longer than the text: a larger -c would only size the
	// KV cache for positions that never come.
	if c.Ctx > len(tokens) {
		c.Ctx = max(len(tokens), 2)
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
