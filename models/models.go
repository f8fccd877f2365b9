// Package models carries the built-in graph files and the built-in default
// model, so that a pinfer binary runs with nothing beside it.
package models

import (
	"crypto/sha256"
	"embed"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
)

//go:embed *.toml
var graphs embed.FS

// Graphs returns the built-in graph files by file name, in name order.
func Graphs() (names []string, texts [][]byte) {
	entries, _ := fs.Glob(graphs, "*.toml")
	sort.Strings(entries)
	for _, e := range entries {
		b, _ := graphs.ReadFile(e)
		names = append(names, e)
		texts = append(texts, b)
	}
	return names, texts
}

// DefaultName is the file name of the built-in default model.
const DefaultName = "shakespeare-relu-6m-f16.gguf"

//go:embed shakespeare-relu-6m-f16.gguf
var defaultModel []byte

// DefaultModelPath returns a path to the built-in model, writing it once to
// the user's cache directory so that it can be memory-mapped like any other.
func DefaultModelPath() (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	sum := sha256.Sum256(defaultModel)
	path := filepath.Join(dir, "pinfer", fmt.Sprintf("%x-%s", sum[:6], DefaultName))
	if st, err := os.Stat(path); err == nil && st.Size() == int64(len(defaultModel)) {
		return path, nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", fmt.Errorf("built-in model: %v", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "model-*.tmp")
	if err != nil {
		return "", fmt.Errorf("built-in model: %v", err)
	}
	if _, err := tmp.Write(defaultModel); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return "", fmt.Errorf("built-in model: %v", err)
	}
	tmp.Close()
	return path, os.Rename(tmp.Name(), path)
}
