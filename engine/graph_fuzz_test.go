package engine

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pinfer/pinfer/internal/fixtures"
	"github.com/pinfer/pinfer/sample"
)

// FuzzBindGraph: a model family is a user's TOML file, so any text given
// with -g either fails with one line, or binds to llama.cpp's stories260K
// and decodes a few tokens inside its vocabulary, without a panic.
func FuzzBindGraph(f *testing.F) {
	for _, name := range []string{"llama.toml", "relu-llama.toml"} {
		b, err := os.ReadFile(filepath.Join("..", "models", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
	model := fixtures.Path(f, "stories260K", "stories260K.gguf")
	path := filepath.Join(f.TempDir(), "g.toml")
	f.Fuzz(func(t *testing.T, text string) {
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		m, err := Load(model, path)
		if err != nil {
			if msg := err.Error(); strings.ContainsAny(msg, "\n\r") {
				t.Fatalf("error of more than one line: %q", msg)
			}
			return
		}
		defer m.Close()
		p := sample.Defaults()
		p.Temp = 0
		res, err := m.Generate(Options{PromptIDs: []int{1, 2}, N: 3, Ctx: 8, Threads: 1, Sample: p})
		if err != nil {
			if msg := err.Error(); strings.ContainsAny(msg, "\n\r") {
				t.Fatalf("error of more than one line: %q", msg)
			}
			return
		}
		for _, id := range res.Tokens {
			if id < 0 || id >= m.Prog.Vocab {
				t.Fatalf("token %d outside the vocabulary of %d", id, m.Prog.Vocab)
			}
		}
	})
}
