package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/pinfer/pinfer/internal/hugepage"
	"github.com/pinfer/pinfer/ops"
	"github.com/pinfer/pinfer/synth"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
)

func genCmd() *cobra.Command {
	var o synth.Options
	var shape, typ, out string
	c := &cobra.Command{
		Use:   "gen -o FILE.gguf",
		Short: "Write a synthetic ReLU-sparse model with random weights (PowerInfer layout)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return fmt.Errorf("gen: -o FILE.gguf is required")
			}
			if shape != "" {
				p, ok := synth.Presets[shape]
				if !ok {
					return fmt.Errorf("gen: --shape %q: want 7b or 13b", shape)
				}
				fl := cmd.Flags()
				for name, dst := range map[string]*int{"n-embd": &o.NEmbd, "n-ff": &o.NFF, "n-layer": &o.NLayer, "n-head": &o.NHead, "n-kv-head": &o.NKVHead, "vocab": &o.Vocab, "rank": &o.Rank} {
					if !fl.Changed(name) {
						*dst = map[string]int{"n-embd": p.NEmbd, "n-ff": p.NFF, "n-layer": p.NLayer, "n-head": p.NHead, "n-kv-head": p.NKVHead, "vocab": p.Vocab, "rank": p.Rank}[name]
					}
				}
			}
			// Key/value heads follow the heads unless given, as in llama.cpp's
			// converters (a model without grouped-query attention).
			if fl := cmd.Flags(); fl.Changed("n-head") && !fl.Changed("n-kv-head") {
				o.NKVHead = o.NHead
			}
			t, err := ops.ParseDType(strings.ToLower(typ))
			if err != nil {
				return fmt.Errorf("gen: --type %q: want f32, f16, q8_0 or q4_0", typ)
			}
			o.Type = t
			if err := o.Check(); err != nil {
				return fmt.Errorf("gen: %v", err)
			}
			bar := progressbar.DefaultBytes(o.Bytes(), "writing "+out)
			defer bar.Close()
			err = synth.Write(out, o, func(done, total int64) { _ = bar.Set64(done) })
			if err == nil {
				// The write left the file cached in small pages; out of the
				// cache, the first run reads it back in 2 MB ones (README).
				_ = hugepage.Uncache(out)
				fmt.Fprintf(os.Stderr, "\nwrote %s: %s\n", out, o.Describe())
			}
			return err
		},
	}
	fl := c.Flags()
	fl.StringVar(&shape, "shape", "", "preset shape: 7b or 13b (flags given explicitly win)")
	fl.IntVar(&o.NEmbd, "n-embd", 512, "embedding width")
	fl.IntVar(&o.NFF, "n-ff", 1408, "FFN neurons per layer")
	fl.IntVar(&o.NLayer, "n-layer", 4, "layers")
	fl.IntVar(&o.NHead, "n-head", 8, "attention heads")
	fl.IntVar(&o.NKVHead, "n-kv-head", 8, "key/value heads (default: --n-head's value when that is given)")
	fl.IntVar(&o.Vocab, "vocab", 32000, "vocabulary size")
	fl.IntVar(&o.Rank, "rank", 256, "predictor rank")
	fl.Float64Var(&o.Active, "active", 0.1, "fraction of FFN neurons that fire per token")
	fl.StringVar(&typ, "type", "q4_0", "weight type: f32, f16, q8_0 or q4_0")
	fl.Uint64Var(&o.Seed, "seed", 1, "random seed (the same seed writes the same file)")
	fl.StringVarP(&out, "output", "o", "", "output file")
	return c
}
