package main

import (
	"fmt"
	"github.com/pinfer/pinfer/internal/outpath"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/pinfer/pinfer/predictors"
	"github.com/pinfer/pinfer/profile"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"gonum.org/v1/plot/vg/draw"
)

func profileCmd() *cobra.Command {
	var mf modelFlags
	var file, out, plotPath string
	var opt profile.Options
	c := &cobra.Command{
		Use:   "profile -f TEXT -o STATS",
		Short: "Count how often each FFN neuron fires over a calibration text (for place and the static predictor)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if file == "" || out == "" {
				return fmt.Errorf("profile: -f TEXT and -o STATS are required")
			}
			if opt.Ctx < 0 {
				return fmt.Errorf("profile: -c %d: want a window size, or 0 for the model's", opt.Ctx)
			}
			if err := checkMaxTokens("profile", opt.MaxTokens); err != nil {
				return err
			}
			if plotPath == "" {
				plotPath = strings.TrimSuffix(out, filepath.Ext(out)) + ".png"
			}
			if err := checkPlot(plotPath, out); err != nil {
				return err
			}
			model, err := modelPath(mf.model)
			if err != nil {
				return err
			}
			ins := []input{{Name: "-m", Path: model}, {Name: "-f", Path: file}, {Name: "--stats", Path: mf.stats}}
			if err := checkOutput("profile", "-o", out, ins...); err != nil {
				return err
			}
			if err := checkOutput("profile", "--plot", plotPath, ins...); err != nil {
				return err
			}
			run, err := mf.openText(file)
			if err != nil {
				return err
			}
			defer run.Close()
			m, text := run.m, run.text
			opt.Pool = run.pool
			bar := tokenBar("profiling")
			opt.Progress = func(done, total int) { bar(done, total) }
			s, err := profile.Run(m, text, opt)
			if err != nil {
				return fmt.Errorf("%s: %v", file, err)
			}
			// Both files, or neither: each is written beside its name and
			// renamed once both are complete.
			statsTmp, err := writeTemp(out, func(tmp string) error { return predictors.WriteStats(tmp, s) })
			if err != nil {
				return fmt.Errorf("profile: -o %s: %v", out, err)
			}
			plotTmp, err := writeTemp(plotPath, func(tmp string) error { return profile.Plot(s, tmp) })
			if err != nil {
				os.Remove(statsTmp)
				return fmt.Errorf("profile: --plot %s: %v", plotPath, err)
			}
			if err := os.Rename(statsTmp, out); err != nil {
				os.Remove(statsTmp)
				os.Remove(plotTmp)
				return fmt.Errorf("profile: -o %s: %v", out, err)
			}
			if err := os.Rename(plotTmp, plotPath); err != nil {
				os.Remove(plotTmp)
				return fmt.Errorf("profile: --plot %s: %v", plotPath, err)
			}
			profile.Summary(os.Stdout, s)
			fmt.Printf("wrote %s and %s\n", out, plotPath)
			return nil
		},
	}
	mf.add(c)
	c.Flags().MarkHidden("predictor")
	c.Flags().MarkHidden("stats")
	c.Flags().StringVarP(&file, "file", "f", "", "calibration text")
	c.Flags().StringVarP(&out, "output", "o", "", "statistics file to write (JSON)")
	c.Flags().StringVar(&plotPath, "plot", "", "power-law plot to write (default: STATS with .png)")
	c.Flags().IntVarP(&opt.Ctx, "ctx-size", "c", 0, "window size in tokens (default: the model's context, at most 512)")
	c.Flags().IntVar(&opt.MaxTokens, "max-tokens", 0, "profile only the first N tokens of the text (0: all)")
	return c
}

// checkPlot refuses, before the profile runs, a plot path that gonum/plot
// has no format for (it would say so only after the work, leaving an empty
// file) or that is the stats file itself (the plot would overwrite it).
func checkPlot(plot, stats string) error {
	if filepath.Clean(plot) == filepath.Clean(stats) {
		return fmt.Errorf("profile: -o %s: the plot (--plot, by default STATS with .png) would overwrite it; name another", stats)
	}
	format := strings.ToLower(strings.TrimPrefix(filepath.Ext(plot), "."))
	// The registry plot.Save looks the extension up in, on a tiny canvas.
	if _, err := draw.NewFormattedCanvas(1, 1, format); err != nil {
		return fmt.Errorf("profile: --plot %s: %v; want .png, .svg, .pdf, .eps, .jpg, .jpeg, .tif, .tiff or .tex", plot, err)
	}
	return nil
}

// input is a file a command reads, named by its flag, that no output of
// the command may replace.
type input = outpath.Input

// checkOutput refuses, before any work, an output path that is one of the
// command's inputs (writing it would destroy the model or text being read),
// a directory, or one in a directory that cannot be written: the work of a
// profile or a training run would be lost at the end.
func checkOutput(cmd, flag, out string, inputs ...input) error {
	if err := outpath.Check(out, inputs...); err != nil {
		return fmt.Errorf("%s: %s %s: %v", cmd, flag, out, err)
	}
	return nil
}

// writeTemp writes a file through write to a new temporary path beside
// path, with path's extension (which picks the plot's format), and returns
// it: the caller renames it to path once every output is complete, so a
// failed write leaves neither a half file nor a changed one.
func writeTemp(path string, write func(tmp string) error) (string, error) {
	ext := filepath.Ext(path)
	f, err := os.CreateTemp(filepath.Dir(path), "."+strings.TrimSuffix(filepath.Base(path), ext)+".*.tmp"+ext)
	if err != nil {
		return "", err
	}
	tmp := f.Name()
	f.Close()
	if err := write(tmp); err != nil {
		os.Remove(tmp)
		return "", err
	}
	if err := os.Chmod(tmp, 0o644); err != nil {
		os.Remove(tmp)
		return "", err
	}
	return tmp, nil
}

// tokenBar returns a progress callback over text tokens, drawn on stderr.
func tokenBar(what string) func(done, total int) {
	var bar *progressbar.ProgressBar
	return func(done, total int) {
		if bar == nil {
			bar = progressbar.NewOptions(total,
				progressbar.OptionSetWriter(os.Stderr),
				progressbar.OptionSetDescription(what),
				progressbar.OptionShowCount(),
				progressbar.OptionSetItsString("tok"),
				progressbar.OptionShowIts(),
				progressbar.OptionSetWidth(30),
				progressbar.OptionThrottle(100*time.Millisecond),
				progressbar.OptionOnCompletion(func() { fmt.Fprintln(os.Stderr) }))
		}
		bar.Set(min(done, total))
	}
}

// checkMaxTokens checks --max-tokens, which profile and predictor eval share
// (predictor train's is train.Config's).
func checkMaxTokens(cmd string, n int) error {
	if n < 0 {
		return fmt.Errorf("%s: --max-tokens %d: want a count, or 0 for the whole text", cmd, n)
	}
	return nil
}
