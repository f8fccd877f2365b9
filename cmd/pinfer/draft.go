package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/pinfer/pinfer/engine"
	"github.com/pinfer/pinfer/ops"
	"github.com/pinfer/pinfer/predictors"
)

// draftFlags are llama.cpp's speculative decoding flags: -md, --draft-max
// and --draft-p-min.
type draftFlags struct {
	path string
	max  int
	pmin float64
}

func (f *draftFlags) add(c *cobra.Command) {
	fl := c.Flags()
	fl.StringVar(&f.path, "model-draft", "", "speculative decoding (-md, as llama.cpp): a smaller model of the same vocabulary (a quantized copy, say) decodes ahead, and each pass checks its tokens; the text is the same as without it")
	fl.IntVar(&f.max, "draft-max", engine.DefaultDraftMax, "with --model-draft: the most tokens a draft holds (--draft, --draft-n)")
	fl.Float64Var(&f.pmin, "draft-p-min", engine.DefaultDraftPMin, "with --model-draft: a draft stops at the first token the draft model gives less than this probability")
}

func (f *draftFlags) check(lookup int) error {
	switch {
	case lookup < 0:
		return fmt.Errorf("--lookup %d: want a count of tokens to draft, or 0 for none", lookup)
	case f.path == "":
		return nil
	case lookup > 0:
		return errors.New("--lookup and --model-draft each draft the tokens: use one of them")
	case f.max < 1:
		return fmt.Errorf("--draft-max %d: want at least 1 token", f.max)
	case f.pmin < 0 || f.pmin > 1:
		return fmt.Errorf("--draft-p-min %g: want a probability in [0, 1]", f.pmin)
	}
	return nil
}

// attach loads the draft model and sets opt to draft with it, in sessions
// of opt's context on pool (which opt then uses too).
func (f *draftFlags) attach(m *engine.Model, opt *engine.Options, pool *ops.Pool, noRepack bool) (func(), error) {
	d, pred, err := f.load(noRepack)
	if err != nil {
		return nil, err
	}
	dr, err := m.NewDraft(d, m.Context(opt.Ctx), pool, pred, f.pmin)
	if err != nil {
		d.Close()
		return nil, err
	}
	opt.Pool, opt.Draft, opt.DraftMax = pool, dr, f.max
	return func() { d.Close() }, nil
}

// load loads the draft model with the predictor its file carries, as
// run's default is; run and serve draft with it.
func (f *draftFlags) load(noRepack bool) (*engine.Model, predictors.Predictor, error) {
	ops.Repack = !noRepack
	d, err := engine.Load(f.path, "")
	if err != nil {
		return nil, nil, fmt.Errorf("--model-draft: %w", err)
	}
	pred, err := d.Predictor("")
	if err != nil {
		d.Close()
		return nil, nil, fmt.Errorf("--model-draft: %w", err)
	}
	return d, pred, nil
}
