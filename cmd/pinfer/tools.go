package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/pinfer/pinfer/convert"
	"github.com/pinfer/pinfer/gguf"
	"github.com/pinfer/pinfer/ops"
	"github.com/pinfer/pinfer/tokenizer"
	"github.com/spf13/cobra"
)

func tokenizeCmd() *cobra.Command {
	var mf modelFlags
	var prompt string
	var asJSON bool
	c := &cobra.Command{
		Use:   "tokenize",
		Short: "Print the token ids of a text (BOS first, as run encodes a prompt)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// The vocabulary alone: llama.cpp's vocab-only files have no weights.
			path, err := modelPath(mf.model)
			if err != nil {
				return err
			}
			f, err := gguf.Open(path)
			if err != nil {
				return err
			}
			defer f.Close()
			tok, err := tokenizer.FromGGUF(f)
			if err != nil {
				return err
			}
			ids := tok.Encode(prompt, tok.Vocab().AddBOS)
			if asJSON {
				return json.NewEncoder(os.Stdout).Encode(ids)
			}
			for _, id := range ids {
				fmt.Printf("%6d -> %q\n", id, tok.Piece(id))
			}
			return nil
		},
	}
	mf.add(c)
	c.Flags().StringVarP(&prompt, "prompt", "p", "", "text to tokenize")
	c.Flags().BoolVar(&asJSON, "json", false, "print the ids as a JSON array")
	return c
}

func convertCmd() *cobra.Command {
	var out, typ string
	c := &cobra.Command{
		Use:   "convert HF_DIR -o FILE.gguf",
		Short: "Convert a Hugging Face checkpoint (LLaMA, Mistral, Mixtral, Falcon, OPT) to GGUF",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return fmt.Errorf("convert: -o FILE.gguf is required")
			}
			t, err := ops.ParseDType(strings.ToLower(typ))
			if err != nil || (t != ops.F32 && t != ops.F16 && t != ops.Q8_0 && t != ops.Q4_0) {
				return fmt.Errorf("convert: --type %q: want f32, f16, q8_0 or q4_0", typ)
			}
			return convert.Convert(args[0], out, convert.Options{Type: t, Progress: true})
		},
	}
	c.Flags().StringVarP(&out, "output", "o", "", "output GGUF file")
	c.Flags().StringVar(&typ, "type", "f16", "weight type: f32, f16, q8_0 or q4_0")
	return c
}

func perplexityCmd() *cobra.Command {
	var mf modelFlags
	var file string
	var nctx int
	c := &cobra.Command{
		Use:   "perplexity -f TEXT",
		Short: "Perplexity of a text, computed as llama.cpp's perplexity tool does",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if file == "" {
				return fmt.Errorf("perplexity: -f TEXT is required")
			}
			if nctx < 0 {
				return fmt.Errorf("perplexity: -c %d: want a window size, or 0 for the model's", nctx)
			}
			run, err := mf.openText(file)
			if err != nil {
				return err
			}
			defer run.Close()
			// The predictor run would use (mlp when the file has fc1/fc2), so
			// that a sparse model is scored on its sparse path.
			pred, err := run.m.Predictor(mf.predictor)
			if err != nil {
				return err
			}
			nctx = run.m.Context(nctx)
			if err := run.m.CheckContext(nctx, 1); err != nil {
				return fmt.Errorf("perplexity: -c %d: %v", nctx, err)
			}
			if w := run.m.PastTraining(nctx); w != "" {
				fmt.Fprintln(os.Stderr, w)
			}
			r, err := run.m.ComputePerplexity(run.text, nctx, pred, run.pool, os.Stdout)
			if err != nil {
				return fmt.Errorf("%s: %v", file, err)
			}
			fmt.Printf("Final estimate: PPL = %.4f +/- %.5f (%d windows of %d tokens, %d tokens scored)\n", r.PPL, r.StdErr, len(r.Windows), nctx, r.Scored)
			return nil
		},
	}
	mf.add(c)
	c.Flags().StringVarP(&file, "file", "f", "", "text file to score")
	c.Flags().IntVarP(&nctx, "ctx-size", "c", 512, "window size in tokens (0: the model's context, at most 4096)")
	return c
}
