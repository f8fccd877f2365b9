package main

import (
	"cmp"
	"fmt"
	"os"
	"strings"

	"github.com/pinfer/pinfer/grammar"
	"github.com/spf13/cobra"
)

// grammarFlags are llama.cpp's flags that constrain the generated text: a
// GBNF grammar, or a JSON Schema turned into one.
type grammarFlags struct {
	text, file, schema, schemaFile string
}

func (f *grammarFlags) add(c *cobra.Command) {
	fl := c.Flags()
	fl.StringVar(&f.text, "grammar", "", `a GBNF grammar (llama.cpp's format) the generated text must match, e.g. 'root ::= "yes" | "no"'`)
	fl.StringVar(&f.file, "grammar-file", "", "read the GBNF grammar from a file")
	fl.StringVarP(&f.schema, "json-schema", "j", "", `a JSON Schema the generated text must be a JSON document of, e.g. '{"type": "object", "properties": {"name": {"type": "string"}}}'`)
	fl.StringVar(&f.schemaFile, "json-schema-file", "", "read the JSON Schema from a file")
}

// grammar compiles the grammar the flags give; nil when none. At most one
// of them may be given; "" is none, as llama.cpp's.
func (f *grammarFlags) grammar(cmd *cobra.Command) (*grammar.Grammar, error) {
	var given []string
	for _, name := range []string{"grammar", "grammar-file", "json-schema", "json-schema-file"} {
		if v, _ := cmd.Flags().GetString(name); v != "" {
			given = append(given, "--"+name)
		}
	}
	if len(given) > 1 {
		return nil, fmt.Errorf("%s each give the whole constraint: use one of them", strings.Join(given, " and "))
	}
	src, flag := f.text, "--grammar"
	switch {
	case len(given) == 0:
		return nil, nil
	case f.file != "" || f.schemaFile != "":
		path := cmp.Or(f.file, f.schemaFile) // one of them, as given says
		flag = given[0] + " " + path
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", given[0], err)
		}
		src = string(b)
	case f.schema != "":
		src, flag = f.schema, "--json-schema"
	}
	if f.schema != "" || f.schemaFile != "" {
		var err error
		if src, err = grammar.FromSchema([]byte(src)); err != nil {
			return nil, fmt.Errorf("%s: %v", flag, err)
		}
	}
	g, err := grammar.Parse(src)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", flag, err)
	}
	return g, nil
}
