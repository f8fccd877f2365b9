package main

import (
	"fmt"
	"math"

	"github.com/pinfer/pinfer/gguf"
	"github.com/pinfer/pinfer/placement"
	"github.com/pinfer/pinfer/predictors"
	"github.com/spf13/cobra"
)

func placeCmd() *cobra.Command {
	var model, stats, out string
	var budgetGiB, sparseCost float64
	c := &cobra.Command{
		Use:   "place [-m FILE] --stats STATS --vram-budget GIB -o FILE.gpuidx",
		Short: "Choose the weights that go to the GPU under a VRAM budget and write PowerInfer's .gpuidx",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if stats == "" {
				return fmt.Errorf("place: --stats STATS is required")
			}
			// No budget places nothing: the index would be empty.
			if !(budgetGiB > 0) || math.IsInf(budgetGiB, 0) {
				return fmt.Errorf("place: --vram-budget %g: want a size in GiB, more than 0", budgetGiB)
			}
			if !(sparseCost > 0) || math.IsInf(sparseCost, 0) {
				return fmt.Errorf("place: --sparse-cost %g: want a positive ratio", sparseCost)
			}
			path, err := modelPath(model) // the built-in model, as run and the other commands
			if err != nil {
				return err
			}
			if out == "" {
				out = path + ".generated.gpuidx"
			}
			if err := checkOutput("place", "-o", out, input{Name: "-m", Path: path}, input{Name: "--stats", Path: stats}); err != nil {
				return err
			}
			st, err := predictors.ReadStats(stats)
			if err != nil {
				return err
			}
			f, err := gguf.Open(path)
			if err != nil {
				return err
			}
			defer f.Close()
			m, err := placement.FromGGUF(f, st)
			if err != nil {
				return fmt.Errorf("%v (profile %s)", err, stats)
			}
			budget := uint64(min(budgetGiB*(1<<30), math.MaxInt64))
			p := placement.Place(m, budget, placement.Costs{Sparse: sparseCost})
			if err := placement.WriteIndex(out, p.Index()); err != nil {
				return err
			}
			neurons, total := 0, 0
			for _, l := range p.Layers {
				neurons += len(l.GPU)
				total += l.NFF
			}
			fmt.Printf("%s: %.2f of %.2f GiB on the GPU: %d of %d dense parts, %d of %d neurons; %.1f%% of the CPU's bytes per token moved\n",
				out, float64(p.Used)/(1<<30), float64(m.Bytes())/(1<<30), len(p.Dense), len(m.Parts), neurons, total, 100*p.Value/max(p.Total, 1))
			return nil
		},
	}
	c.Flags().StringVarP(&model, "model", "m", "", "model GGUF file (default: the built-in Shakespeare model)")
	c.Flags().StringVar(&stats, "stats", "", "activation profile (JSON from 'pinfer profile')")
	c.Flags().Float64Var(&budgetGiB, "vram-budget", 0, "GPU memory for weights, in GiB")
	c.Flags().StringVarP(&out, "output", "o", "", "output .gpuidx (default: FILE.generated.gpuidx)")
	c.Flags().Float64Var(&sparseCost, "sparse-cost", 1, "CPU cost of a byte of sparse rows relative to a byte of a dense stream")
	return c
}
