package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/pinfer/pinfer/convert"
	"github.com/pinfer/pinfer/gguf"
	"github.com/pinfer/pinfer/ops"
	"github.com/pinfer/pinfer/tokenizer"
	"github.com/spf13/cobra"
)

func tokenizeCmd() *cobra.Command {
	var mf modelFlags
	var prompt, file string
	var asJSON, ids, noBOS, noParseSpecial, showCount bool
	c := &cobra.Command{
		Use:   "tokenize",
		Short: "Print the token ids of a text (BOS first), as llama-tokenize does",
		Long: `Print the token ids of a text, BOS first, and each piece, as llama-tokenize
does: the text of a special token (<s>, <|user|>, <|end|>, ...) becomes that
token unless --no-parse-special is given.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			hasPrompt, hasFile := cmd.Flags().Changed("prompt"), cmd.Flags().Changed("file")
			switch {
			case hasPrompt && hasFile:
				return fmt.Errorf("tokenize: give -p TEXT or -f FILE, not both")
			case !hasPrompt && !hasFile:
				return fmt.Errorf("tokenize: -p TEXT or -f FILE is required")
			case hasFile:
				b, err := os.ReadFile(file)
				if err != nil {
					return err
				}
				prompt = string(b)
			}
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
			addBOS := tok.Vocab().AddBOS && !noBOS
			var toks []int
			if noParseSpecial {
				toks = tok.Encode(prompt, addBOS)
			} else {
				toks = tok.EncodeSpecial(prompt, addBOS)
			}
			switch {
			case asJSON:
				if err := json.NewEncoder(os.Stdout).Encode(toks); err != nil {
					return err
				}
			case ids:
				s := make([]string, len(toks))
				for i, id := range toks {
					s[i] = strconv.Itoa(id)
				}
				fmt.Printf("[%s]\n", strings.Join(s, ", "))
			default:
				for _, id := range toks {
					fmt.Printf("%6d -> %q\n", id, tok.Piece(id))
				}
			}
			if showCount {
				fmt.Printf("Total number of tokens: %d\n", len(toks))
			}
			return nil
		},
	}
	mf.add(c)
	c.Flags().StringVarP(&prompt, "prompt", "p", "", "text to tokenize")
	c.Flags().StringVarP(&file, "file", "f", "", "file whose text to tokenize")
	c.Flags().BoolVar(&asJSON, "json", false, "print the ids as a JSON array")
	c.Flags().BoolVar(&ids, "ids", false, "print only the ids, as [1, 2, 3] (llama-tokenize's --ids)")
	c.Flags().BoolVar(&noBOS, "no-bos", false, "do not add BOS")
	c.Flags().BoolVar(&noParseSpecial, "no-parse-special", false, "encode the text of special tokens as plain text")
	c.Flags().BoolVar(&showCount, "show-count", false, "print the number of tokens last")
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
			if err != nil || (t != ops.F32 && t != ops.F16 && t != ops.BF16 && t != ops.Q8_0 && t != ops.Q4_0) {
				return fmt.Errorf("convert: --type %q: want f32, f16, bf16, q8_0 or q4_0", typ)
			}
			return convert.Convert(args[0], out, convert.Options{Type: t, Progress: true})
		},
	}
	c.Flags().StringVarP(&out, "output", "o", "", "output GGUF file")
	c.Flags().StringVar(&typ, "type", "f16", "weight type: f32, f16, bf16 (runs on the CPU only), q8_0 or q4_0")
	return c
}
