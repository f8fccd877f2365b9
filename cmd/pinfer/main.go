// Command pinfer runs ReLU-sparse language models described as TOML graphs.
package main

import (
	"fmt"
	"os"
	"runtime/pprof"
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
	// A CPU profile of any command, for finding where a token's time goes.
	var cpuProfile string
	root.PersistentFlags().StringVar(&cpuProfile, "cpuprofile", "", "write a pprof CPU profile of the command to this file")
	root.PersistentPreRunE = func(*cobra.Command, []string) error {
		if cpuProfile == "" {
			return nil
		}
		f, err := os.Create(cpuProfile)
		if err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		return pprof.StartCPUProfile(f)
	}
	defer pprof.StopCPUProfile()
	root.AddCommand(runCmd(), tokenizeCmd(), convertCmd(), perplexityCmd(), genCmd(), serveCmd(), placeCmd(), benchCmd(), profileCmd(), predictorCmd(), quantizeCmd(), showCmd(), embedCmd())
	rewriteLlamaFlags()
	if err := root.Execute(); err != nil {
		// One line, whatever went wrong.
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "pinfer: "+strings.ReplaceAll(err.Error(), "\n", " "))
		os.Exit(1)
	}
}
