package main

import (
	"errors"
	"fmt"
	"math"
	"os"

	"github.com/pinfer/pinfer/hybrid"
	"github.com/pinfer/pinfer/ops"
	"github.com/spf13/cobra"
)

// gpuFlags are PowerInfer's GPU flags, on run, bench and serve.
type gpuFlags struct {
	budget                   float64 // GiB
	disableIndex, resetIndex bool
}

func (g *gpuFlags) add(c *cobra.Command) {
	c.Flags().Float64Var(&g.budget, "vram-budget", 0, "GPU memory for weights, in GiB (0: CPU only; needs a CUDA build)")
	c.Flags().BoolVar(&g.disableIndex, "disable-gpu-index", false, "put only dense parts (attention, predictors, output) on the GPU; no FFN neurons, no .gpuidx")
	c.Flags().BoolVar(&g.resetIndex, "reset-gpu-index", false, "make <model>.generated.gpuidx again even if one is cached")
}

// indexNeedsBudget refuses the GPU index flags without a budget, which
// places nothing on the GPU: they would be ignored without a word.
func (g *gpuFlags) indexNeedsBudget() error {
	switch {
	case g.budget > 0:
	case g.resetIndex:
		return errors.New("--reset-gpu-index: there is no GPU index without --vram-budget")
	case g.disableIndex:
		return errors.New("--disable-gpu-index: there is no GPU index without --vram-budget")
	}
	return nil
}

// bytes is the budget, checked, the index flags with it.
func (g *gpuFlags) bytes() (uint64, error) {
	if g.budget < 0 || math.IsNaN(g.budget) || math.IsInf(g.budget, 0) {
		return 0, fmt.Errorf("--vram-budget %g: want a size in GiB, 0 or more", g.budget)
	}
	if err := g.indexNeedsBudget(); err != nil {
		return 0, err
	}
	return uint64(min(g.budget*(1<<30), math.MaxInt64)), nil
}

// hybridOptions say how run, serve and bench's hybrid mode find the placement.
func (g *gpuFlags) hybridOptions(mf *modelFlags, pool *ops.Pool, log bool) (hybrid.Options, error) {
	b, err := g.bytes()
	o := hybrid.Options{Budget: b, Stats: mf.stats, Disable: g.disableIndex, Reset: g.resetIndex, Pool: pool}
	if log {
		o.Log = os.Stderr
	}
	return o, err
}
