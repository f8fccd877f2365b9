package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/pinfer/pinfer/grammar"
	"github.com/spf13/cobra"
)

// grammarFlags are llama.cpp's flags that constrain the generated text.
type grammarFlags struct {
	text, file string
}

func (f *grammarFlags) add(c *cobra.Command) {
	fl := c.Flags()
	fl.StringVar(&f.text, "grammar", "", `a GBNF grammar (llama.cpp's format) the generated text must match, e.g. 'root ::= "yes" | "no"'`)
	fl.StringVar(&f.file, "grammar-file", "", "read the GBNF grammar from a file")
}

// grammar compiles the grammar the flags give; nil when none.
func (f *grammarFlags) grammar(cmd *cobra.Command) (*grammar.Grammar, error) {
	given := 0
	for _, name := range []string{"grammar", "grammar-file"} {
		if cmd.Flags().Changed(name) {
			given++
		}
	}
	switch {
	case given > 1:
		return nil, errors.New("--grammar and --grammar-file each give the whole grammar: use one of them")
	case f.file != "":
		b, err := os.ReadFile(f.file)
		if err != nil {
			return nil, fmt.Errorf("--grammar-file: %v", err)
		}
		g, err := grammar.Parse(string(b))
		if err != nil {
			return nil, fmt.Errorf("--grammar-file %s: %v", f.file, err)
		}
		return g, nil
	case f.text != "": // "" is no grammar, as llama.cpp's
		g, err := grammar.Parse(f.text)
		if err != nil {
			return nil, fmt.Errorf("--grammar: %v", err)
		}
		return g, nil
	}
	return nil, nil
}
