// Command pinfer runs ReLU-sparse language models described as TOML graphs.
package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
)

func main() {
	root := &cobra.Command{
		Use:           "pinfer",
		Short:         "Run ReLU-sparse LLMs from GGUF files and TOML operator graphs",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(runCmd(), tokenizeCmd(), convertCmd(), perplexityCmd(), genCmd(), serveCmd(), placeCmd(), benchCmd(), profileCmd(), predictorCmd())
	if err := root.Execute(); err != nil {
		// One line, whatever went wrong.
		fmt.Fprintln(os.Stderr, "pinfer: "+strings.ReplaceAll(err.Error(), "\n", " "))
		os.Exit(1)
	}
}
