package engine

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pinfer/pinfer/gguf"
	"github.com/pinfer/pinfer/internal/fixtures"
	"github.com/pinfer/pinfer/sample"
)

// FuzzLoadMetadata: llama.cpp's stories260K with one metadata value
// changed (to another value of its type, to an int32 or to a string)
// either fails to load with one line, or loads and decodes a few tokens
// that lie in its vocabulary: the graph binds every size it takes from the
// file against the tensors before it runs.
func FuzzLoadMetadata(f *testing.F) {
	src, err := gguf.Open(fixtures.Path(f, "stories260K", "stories260K.gguf"))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { src.Close() })
	for i := range src.KVs {
		f.Add(uint8(i), uint8(0), int64(0), 0.0, "")
		f.Add(uint8(i), uint8(0), int64(1), 1.0, "x")
	}
	f.Add(uint8(15), uint8(0), int64(1), 0.0, "")      // head_count_kv 1
	f.Add(uint8(17), uint8(0), int64(4), 0.0, "")      // rope.dimension_count 4
	f.Add(uint8(14), uint8(0), int64(16), 0.0, "")     // head_count 16
	f.Add(uint8(11), uint8(0), int64(1), 0.0, "")      // context_length 1
	f.Add(uint8(4), uint8(2), int64(0), 0.0, "falcon") // architecture
	f.Add(uint8(8), uint8(0), int64(1<<31), 0.0, "")   // eos far out
	f.Add(uint8(18), uint8(0), int64(0), 1e30, "")     // eps
	dir := f.TempDir()
	path := filepath.Join(dir, "m.gguf")
	f.Fuzz(func(t *testing.T, which, kind uint8, i int64, x float64, s string) {
		kv := src.KVs[int(which)%len(src.KVs)]
		var v any
		switch kind % 3 {
		case 0:
			switch kv.Value.V.(type) {
			case uint32:
				v = uint32(i)
			case float32:
				v = float32(x)
			case string:
				v = s
			default:
				v = []int32{int32(i)}
			}
		case 1:
			v = int32(i)
		default:
			v = s
		}
		if err := writeWithKV(src, path, map[string]any{kv.Key: v}); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(path)
		loadAndDecode(t, path, "", fmt.Sprintf("%s = %v: ", kv.Key, v))
	})
}

// loadAndDecode loads model (with graph, if given) and decodes a few
// tokens greedily: each step either fails with one line or, at the end,
// gives tokens inside the vocabulary. what prefixes the failure.
func loadAndDecode(t *testing.T, model, graph, what string) {
	oneLine := func(err error) {
		if msg := err.Error(); strings.ContainsAny(msg, "\n\r") {
			t.Fatalf("%serror of more than one line: %q", what, msg)
		}
	}
	m, err := Load(model, graph)
	if err != nil {
		oneLine(err)
		return
	}
	defer m.Close()
	p := sample.Defaults()
	p.Temp = 0
	res, err := m.Generate(Options{PromptIDs: []int{1, 2}, N: 3, Ctx: 8, Threads: 1, Sample: p})
	if err != nil {
		oneLine(err)
		return
	}
	for _, id := range res.Tokens {
		if id < 0 || id >= m.Prog.Vocab {
			t.Fatalf("%stoken %d outside the vocabulary of %d", what, id, m.Prog.Vocab)
		}
	}
}
