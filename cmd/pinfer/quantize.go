package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/pinfer/pinfer/internal/hugepage"
	"github.com/pinfer/pinfer/internal/progress"
	"github.com/pinfer/pinfer/quantize"
	"github.com/spf13/cobra"
)

func quantizeCmd() *cobra.Command {
	var opt quantize.Options
	c := &cobra.Command{
		Use:                   "quantize [--allow-requantize] [--leave-output-tensor] [--pure] IN.gguf OUT.gguf TYPE [NTHREADS]",
		Short:                 "Rewrite a GGUF or PowerInfer file with its weights in another type, as llama-quantize does",
		DisableFlagsInUseLine: true,
		Long: `Rewrite a GGUF or PowerInfer (PWRI) file with its weights in another type, as
llama.cpp's llama-quantize does. TYPE is f32, f16, bf16, q8_0 or q4_0 in any
case, or llama.cpp's file type id for it (0, 1, 32, 7, 2). Each tensor gets
the type 'pinfer convert --type TYPE' gives it: the matrices TYPE (PowerInfer's
ffn_down_t and fc1/fc2 predictors too), f16 for a matrix whose rows do not fill
TYPE's blocks, f32 for vectors, the MoE router and learned positions; integer
tensors (PowerInfer's gpu_idx, gpu_bucket) are copied as they are. NTHREADS
goroutines (default: one per CPU) quantize the rows.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 3 || len(args) > 4 {
				return fmt.Errorf("quantize: want IN.gguf OUT.gguf TYPE [NTHREADS], got %d argument(s)", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			in, out := args[0], args[1]
			t, err := quantize.ParseType(args[2])
			if err != nil {
				return fmt.Errorf("quantize: %v", err)
			}
			opt.Type = t
			if len(args) == 4 {
				if opt.Threads, err = strconv.Atoi(args[3]); err != nil {
					return fmt.Errorf("quantize: NTHREADS %q: want a number of threads", args[3])
				}
			}
			var finish func()
			opt.Progress, finish = progress.Writing(out)
			start := time.Now()
			plan, err := quantize.File(in, out, opt)
			finish()
			if err != nil {
				return err
			}
			// As gen's: out of the cache, the first run reads the file back
			// in 2 MB pages (README).
			_ = hugepage.Uncache(out)
			printQuantizeSummary(plan, in, out, opt.Type, time.Since(start))
			return nil
		},
	}
	fl := c.Flags()
	fl.BoolVar(&opt.AllowRequantize, "allow-requantize", false, "allow quantizing tensors that are already quantized (worse than quantizing from f16 or f32)")
	fl.BoolVar(&opt.LeaveOutput, "leave-output-tensor", false, "leave output.weight as it is (a larger file, and the output's precision kept)")
	// --pure turns off llama-quantize's k-quant mixtures (output.weight in
	// q6_K, some attn_v and ffn_down with more bits); pinfer has none, so its
	// files are pure already and the flag changes nothing.
	fl.Bool("pure", false, "quantize all matrices to TYPE, with no mixture (pinfer's files have none: accepted for llama-quantize's command lines)")
	return c
}

// printQuantizeSummary lists each tensor as llama-quantize does (name,
// shape, type before and after, size before and after), then the model's
// size before and after.
func printQuantizeSummary(plan []quantize.Tensor, in, out string, typ fmt.Stringer, took time.Duration) {
	const mib = 1 << 20
	shapes := make([]string, len(plan))
	nameW, shapeW := 0, 0
	for i, t := range plan {
		dims := make([]string, len(t.Dims))
		for k, d := range t.Dims {
			dims[k] = strconv.FormatUint(d, 10)
		}
		shapes[i] = "[" + strings.Join(dims, ", ") + "]"
		nameW, shapeW = max(nameW, len(t.Name)), max(shapeW, len(shapes[i]))
	}
	var before, after uint64
	for i, t := range plan {
		line := fmt.Sprintf("[%4d/%4d] %-*s %-*s %5s -> %-5s %9.3f MiB -> %9.3f MiB", i+1, len(plan), nameW, t.Name,
			shapeW, shapes[i], t.From, t.To, float64(t.FromBytes)/mib, float64(t.ToBytes)/mib)
		if t.Note != "" {
			line += " (" + t.Note + ")"
		}
		fmt.Println(line)
		before += t.FromBytes
		after += t.ToBytes
	}
	fmt.Printf("quantize: model size = %9.2f MiB (%s)\n", float64(before)/mib, in)
	fmt.Printf("quantize: quant size = %9.2f MiB (%s, %s)\n", float64(after)/mib, out, typ)
	fmt.Printf("quantize: took %.2f s\n", took.Seconds())
}
