package engine

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/pinfer/pinfer/internal/fixtures"
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
		loadAndDecode(t, model, path, "")
	})
}
