package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"

	"github.com/pinfer/pinfer/graph"
	"github.com/spf13/cobra"
)

// promptCache is run's --prompt-cache, as llama-cli's: the session state
// (tokens and KV cache, graph.Session.SaveState's format) is read from the
// file when it exists, the prompt then runs only past what it shares with
// the saved tokens, and the state is written back once the prompt has run
// (with --prompt-cache-all, after the text, its tokens included;
// --prompt-cache-ro never writes). A file saved by another model, graph,
// KV cache type, or holding more tokens than the context, is refused, not
// ignored: a stale file is an error to see, and deleting it starts anew.
// A missing or empty file is made.
type promptCache struct {
	path    string
	all, ro bool
	loaded  []int // the tokens the file held
	report  promptCacheReport
}

// promptCacheReport is --json's prompt_cache.
type promptCacheReport struct {
	File   string `json:"file"`
	Loaded int    `json:"loaded"` // positions the file held
	Reused int    `json:"reused"` // prompt tokens taken from them (timings.cache_n)
	Saved  int    `json:"saved"`  // positions written back (0: not written)
	Bytes  int64  `json:"bytes_written,omitempty"`
}

func (pc *promptCache) add(c *cobra.Command) {
	fl := c.Flags()
	fl.StringVar(&pc.path, "prompt-cache", "", "file of the session state (tokens and KV cache) to start from and save to, as llama-cli's: the prompt runs only past what it shares with the saved tokens, and the state is saved once the prompt has run; a file of another model, graph, KV type or too long for the context is refused")
	fl.BoolVar(&pc.all, "prompt-cache-all", false, "with --prompt-cache: save after the text, its tokens included")
	fl.BoolVar(&pc.ro, "prompt-cache-ro", false, "with --prompt-cache: read the file, never write it")
}

// check refuses the flags' combinations that mean nothing.
func (pc *promptCache) check(cmd *cobra.Command, cnv bool) error {
	if pc.path == "" {
		for _, f := range []string{"prompt-cache-all", "prompt-cache-ro"} {
			if cmd.Flags().Changed(f) {
				return fmt.Errorf("--%s is for --prompt-cache FILE: add it", f)
			}
		}
		return nil
	}
	if cnv {
		return errors.New("--prompt-cache is for one prompt: a conversation keeps its own cache across turns")
	}
	return nil
}

// load reads the file into sess, if there is one.
func (pc *promptCache) load(sess *graph.Session) error {
	pc.report.File = pc.path
	st, err := os.Stat(pc.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil // made once the prompt has run
	case err != nil:
		return fmt.Errorf("--prompt-cache %v", err)
	case st.IsDir():
		return fmt.Errorf("--prompt-cache %s: a directory, not a file", pc.path)
	case st.Size() == 0:
		return nil // llama-cli starts an empty file anew
	}
	n, _, err := sess.LoadStateFile(pc.path)
	if err != nil {
		return fmt.Errorf("--prompt-cache %s: %v", pc.path, err)
	}
	pc.loaded = append([]int(nil), sess.Tokens()...)
	pc.report.Loaded = n
	return nil
}

// afterPrompt saves the session once the prompt has run, unless the file
// already holds just that (llama-cli saves when the prompt did not all
// come from it).
func (pc *promptCache) afterPrompt(sess *graph.Session) error {
	if pc.ro || pc.all || slices.Equal(sess.Tokens(), pc.loaded) {
		return nil
	}
	return pc.save(sess)
}

// afterText saves the session with the text's tokens (--prompt-cache-all).
func (pc *promptCache) afterText(sess *graph.Session) error {
	if pc.ro || !pc.all {
		return nil
	}
	return pc.save(sess)
}

func (pc *promptCache) save(sess *graph.Session) error {
	n, err := sess.SaveStateFile(pc.path)
	if err != nil {
		return fmt.Errorf("--prompt-cache %s: saving: %v", pc.path, err)
	}
	pc.report.Saved, pc.report.Bytes = sess.Pos(), n
	return nil
}

// summary is the line run prints after its timings.
func (pc *promptCache) summary(promptTokens int) string {
	s := fmt.Sprintf("prompt cache = %d of %d prompt tokens from %s (it held %d)", pc.report.Reused, promptTokens, pc.path, pc.report.Loaded)
	switch {
	case pc.report.Saved > 0:
		s += fmt.Sprintf("; saved %d tokens, %d bytes", pc.report.Saved, pc.report.Bytes)
	case pc.ro:
		s += "; read-only"
	}
	return s
}
