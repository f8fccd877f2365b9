package grammar

import (
	"testing"

	"github.com/pinfer/pinfer/gguf"
	"github.com/pinfer/pinfer/internal/fixtures"
	"github.com/pinfer/pinfer/tokenizer"
)

// BenchmarkAllowed times a decode step's mask over LLaMA's 32000 tokens
// in three states of the JSON grammar: at the start (an object), inside a
// string (almost every token fits) and after a key's colon (a value).
func BenchmarkAllowed(b *testing.B) {
	f, err := gguf.Open(fixtures.Path(b, "vocab-llama-spm", "ggml-vocab-llama-spm.gguf"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		b.Fatal(err)
	}
	v := NewVocab(tok.Texts(), tok.Ends())
	g := mustParse(b, JSON)
	mask := make([]bool, v.Size())
	for _, c := range []struct{ name, text string }{{"start", ""}, {"string", `{"name": "Jo`}, {"value", `{"a": `}} {
		m := g.NewMatcher(v)
		for _, r := range c.text {
			m.st = m.a.next(m.st, r)
		}
		b.Run(c.name, func(b *testing.B) {
			n := 0
			for b.Loop() {
				n = m.Allowed(mask)
			}
			b.ReportMetric(float64(n), "allowed")
		})
	}
}
