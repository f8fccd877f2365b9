package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/pinfer/pinfer/bench"
	"github.com/pinfer/pinfer/engine"
	"github.com/spf13/cobra"
)

func benchCmd() *cobra.Command {
	var mf modelFlags
	var g gpuFlags
	var o bench.Options
	var modes, format string
	c := &cobra.Command{
		Use:   "bench -m FILE",
		Short: "Measure prefill and decode speed, dense against sparse in one run (llama-bench style)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if format != "md" && format != "json" {
				return fmt.Errorf("bench: -o %q: want md or json", format)
			}
			if err := o.Check(); err != nil {
				return err
			}
			o.Modes = strings.Split(modes, ",")
			for _, mode := range o.Modes {
				if strings.TrimSpace(mode) == "" {
					return fmt.Errorf("bench: --mode %q: a mode is empty", modes)
				}
			}
			o.Threads = mf.threads
			m, err := mf.load()
			if err != nil {
				return err
			}
			defer m.Close()
			// The default modes on a file without a predictor (the built-in
			// model's): dense alone, as llama-bench runs with no arguments.
			if !cmd.Flags().Changed("mode") && !m.HasPredictor() {
				o.Modes = []string{"dense"}
				fmt.Fprintf(os.Stderr, "bench: %s carries no predictor (fc1/fc2), so only dense runs; name one to compare, e.g. --mode dense,oracle\n", m.File.Path)
			}
			if g.budget > 0 {
				o.Device = benchGPU(m, &mf, &g)
			}
			rep, err := bench.Run(m, o)
			if err != nil {
				return err
			}
			if format == "json" {
				enc := json.NewEncoder(os.Stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(rep)
			}
			printTable(m, rep)
			return nil
		},
	}
	mf.add(c)
	g.add(c)
	fl := c.Flags()
	fl.IntVarP(&o.Prompt, "n-prompt", "p", 64, "prompt tokens of the prefill test (0: skip)")
	fl.IntVarP(&o.Gen, "n-gen", "n", 16, "tokens of the decode test (0: skip)")
	fl.IntVarP(&o.Depth, "n-depth", "d", 0, "tokens already in the context when each test starts (prefilled, not timed), as llama-bench's -d")
	fl.IntVarP(&o.Reps, "repetitions", "r", 5, "repetitions of each test")
	fl.StringVar(&modes, "mode", "dense,sparse", "comma-separated: dense, sparse (the file's predictor), split (llama.cpp's -ngl layer split on the GPU, dense), hybrid (hot neurons on the GPU, the file's predictor), or a predictor name; if not given and the file has no predictor, dense alone")
	fl.StringVarP(&format, "output", "o", "md", "md or json")
	return c
}

func printTable(m *engine.Model, r *bench.Report) {
	fmt.Printf("| model | size | params | backend | threads | mode | test | t/s | median | bytes/token | GB/s (%% of stream GB/s) |\n")
	fmt.Printf("| --- | ---: | ---: | --- | ---: | --- | --- | ---: | ---: | ---: | ---: |\n")
	name := filepath.Base(r.Model)
	for _, x := range r.Results {
		bpt, gbs, backend := "", "", r.Backend
		if r.Repacked > 0 {
			backend += ", q4_0 repacked"
		}
		if r.KVType != "f32" {
			backend += ", KV " + r.KVType // as llama-bench shows a non-default type_k
		}
		if x.BytesPerToken > 0 {
			bpt = fmt.Sprintf("%.2f GB", x.BytesPerToken/1e9)
			gbs = fmt.Sprintf("%.1f (%.0f%% of %.1f)", x.GBPerSec, 100*x.OfStream, x.StreamGBps)
		}
		if x.Placed != "" {
			// Part of the reads come from GPU memory: the CPU's streaming
			// read is no ceiling for them. (A mode that hands the step to
			// the device executor leaves no program to count bytes in.)
			backend += " + CUDA"
			if x.BytesPerToken > 0 {
				gbs = fmt.Sprintf("%.1f", x.GBPerSec)
			}
		}
		mode := x.Mode
		if x.Predictor != x.Mode {
			mode += " (" + x.Predictor + ")"
		}
		fmt.Printf("| %s | %.2f GiB | %.2f B | %s | %d | %s | %s | %.2f ± %.2f | %.2f | %s | %s |\n",
			name, float64(r.SizeBytes)/(1<<30), float64(r.Params)/1e9, backend, r.Threads, mode, x.Test, x.Mean, x.SD, x.Median, bpt, gbs)
	}
	fmt.Printf("\nGB/s: decode's weight reads per second at the median; (%% of stream): median over repetitions of that repetition's reads against a streaming read measured around it (mean of just before and just after)\n")
	if r.HugePages >= 0 {
		fmt.Printf("weights in 2 MB pages: %.0f%% of those read (a file cached through a plain read or write keeps 4 KB pages until it leaves the page cache)\n", 100*r.HugePages)
	}
	tg, pp := map[string]float64{}, map[string]float64{}
	var modes []string
	for _, x := range r.Results {
		if strings.HasPrefix(x.Test, "tg") {
			tg[x.Mode] = x.Median
		}
		if strings.HasPrefix(x.Test, "pp") {
			pp[x.Mode] = x.Median
		}
		if !slices.Contains(modes, x.Mode) {
			modes = append(modes, x.Mode)
		}
		if x.Placed != "" && strings.HasPrefix(x.Test, "tg") {
			fmt.Printf("%s: %s\n", x.Mode, x.Placed)
		}
	}
	for _, q := range [][2]string{{"sparse", "dense"}, {"hybrid", "split"}, {"hybrid", "sparse"}} {
		if tg[q[0]] > 0 && tg[q[1]] > 0 {
			fmt.Printf("%s / %s decode (medians): %.2fx\n", q[0], q[1], tg[q[0]]/tg[q[1]])
		}
	}
	for _, m := range modes {
		if pp[m] > 0 && tg[m] > 0 {
			fmt.Printf("%s prefill / decode per token (medians): %.2fx\n", m, pp[m]/tg[m])
		}
	}
}
