package main

import (
	"fmt"
	"os"
	"time"

	"github.com/pinfer/pinfer/train"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
)

func predictorCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "predictor",
		Short: "Train and evaluate sparse FFN activation predictors",
	}
	c.AddCommand(predictorTrainCmd(), predictorEvalCmd())
	return c
}

func predictorTrainCmd() *cobra.Command {
	var mf modelFlags
	var file, out string
	var cfg train.Config
	c := &cobra.Command{
		Use:   "train -f TEXT -o OUT.gguf",
		Short: "Train PowerInfer-style predictors (fc1, relu, fc2 per layer) and write them into a PWRI model file",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if file == "" || out == "" {
				return fmt.Errorf("predictor train: -f TEXT and -o OUT.gguf are required")
			}
			if err := cfg.Check(); err != nil {
				return fmt.Errorf("predictor train: %v", err)
			}
			model, err := modelPath(mf.model)
			if err != nil {
				return err
			}
			// Before hours of training, not after: the output must be
			// writable and must not be the model or the text being read.
			if err := checkOutput("predictor train", "-o", out, input{Name: "-m", Path: model}, input{Name: "-f", Path: file}); err != nil {
				return err
			}
			run, err := mf.openText(file)
			if err != nil {
				return err
			}
			defer run.Close()
			m, text := run.m, run.text
			cfg.Pool = run.pool
			cfg.Collected = tokenBar("collecting hidden states")
			var bar *progressbar.ProgressBar
			cfg.Progress = func(steps int) { bar.Set(steps) }
			cfg.Started = func(total int) {
				bar = progressbar.NewOptions(total,
					progressbar.OptionSetWriter(os.Stderr),
					progressbar.OptionSetDescription("training"),
					progressbar.OptionShowCount(),
					progressbar.OptionSetWidth(30),
					progressbar.OptionThrottle(100*time.Millisecond),
					progressbar.OptionOnCompletion(func() { fmt.Fprintln(os.Stderr) }))
			}
			reps, err := train.Train(m, m.Encode(text), out, cfg)
			if err != nil {
				return err
			}
			if bar != nil {
				bar.Finish()
			}
			fmt.Printf("on held-out tokens of %s (the last %.0f%% collected):\n", file, 100*cfg.Holdout)
			fmt.Printf("%-9s  %5s  %7s  %9s  %9s  %9s  %6s\n", "layer", "rank", "recall", "mass kept", "precision", "predicted", "true")
			for _, r := range reps {
				note := ""
				if r.Dense {
					note = "  (too few tokens routed here to fit: runs dense)"
				}
				fmt.Printf("%-9s  %5d  %7.4f  %9.6f  %9.4f  %8.2f%%  %5.2f%%%s\n", r.Name(), r.Rank, r.Recall, r.Mass, r.Precision, 100*r.Predicted, 100*r.True, note)
			}
			fmt.Printf("wrote %s\n", out)
			return nil
		},
	}
	mf.add(c)
	c.Flags().MarkHidden("predictor")
	c.Flags().MarkHidden("stats")
	fl := c.Flags()
	fl.StringVarP(&file, "file", "f", "", "training text")
	fl.StringVarP(&out, "output", "o", "", "model file to write, with the predictors (PWRI)")
	fl.IntVar(&cfg.Rank, "rank", 0, "fc1 rows per layer (even; default: from each layer's sparsity)")
	fl.IntVar(&cfg.Epochs, "epochs", 0, "passes of Adam (class-weighted BCE) over the training tokens after the linear start")
	fl.IntVarP(&cfg.Ctx, "ctx-size", "c", 512, "window size in tokens")
	fl.IntVar(&cfg.MaxTokens, "max-tokens", 0, "use only the first N tokens of the text (0: all)")
	fl.Float64Var(&cfg.Recall, "recall", 0.99, "recall each layer's cut must reach on held-out tokens (a floor)")
	fl.Float64Var(&cfg.Kept, "kept", 0.99999, "share of the activation mass, all layers together, the cuts must keep on held-out tokens")
	fl.Float64Var(&cfg.Holdout, "holdout", 0.2, "share of the collected tokens held out for the cut and the report")
	return c
}

func predictorEvalCmd() *cobra.Command {
	var mf modelFlags
	var file string
	var nctx, maxTokens int
	c := &cobra.Command{
		Use:   "eval -f TEXT",
		Short: "Per layer recall, precision and active fractions of a predictor, and perplexity dense vs sparse",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if file == "" {
				return fmt.Errorf("predictor eval: -f TEXT is required")
			}
			if err := checkMaxTokens("predictor eval", maxTokens); err != nil {
				return err
			}
			// 0 is the model's context, at most 512, as for profile (and
			// llama.cpp's perplexity); a window scores its second half.
			if nctx < 0 || nctx > 0 && nctx < 4 {
				return fmt.Errorf("predictor eval: -c %d: want a window of at least 4 tokens, or 0 for the model's context (at most 512)", nctx)
			}
			run, err := mf.openText(file)
			if err != nil {
				return err
			}
			defer run.Close()
			m, text, pool := run.m, run.text, run.pool
			p, err := m.Predictor(mf.predictor)
			if err != nil {
				return err
			}
			tokens := m.Encode(text)
			if maxTokens > 0 && len(tokens) > maxTokens {
				tokens = tokens[:maxTokens]
			}
			if nctx == 0 {
				nctx = min(max(m.ContextLength(), 4), 512)
			}
			e, err := train.Evaluate(m, p, tokens, nctx, pool, nil)
			if err != nil {
				return fmt.Errorf("%s: %v", file, err)
			}
			e.Print(os.Stdout)
			return nil
		},
	}
	mf.add(c)
	c.Flags().StringVarP(&file, "file", "f", "", "evaluation text (not used for training)")
	c.Flags().IntVarP(&nctx, "ctx-size", "c", 512, "window size in tokens (0: the model's context, at most 512)")
	c.Flags().IntVar(&maxTokens, "max-tokens", 0, "use only the first N tokens of the text (0: all)")
	return c
}
