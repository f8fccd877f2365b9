package graph

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pinfer/pinfer/gguf"
	"github.com/pinfer/pinfer/internal/fixtures"
	"github.com/stretchr/testify/require"
)

func llamaTOML(t testing.TB) string {
	b, err := os.ReadFile(filepath.Join("..", "models", "llama.toml"))
	require.NoError(t, err)
	return string(b)
}

func stories(t testing.TB) *gguf.File {
	f, err := gguf.Open(fixtures.Path(t, "stories260K", "stories260K.gguf"))
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	return f
}

func build(t testing.TB, text string) (*Program, error) {
	spec, err := ParseSpec("bad.toml", []byte(text))
	if err != nil {
		return nil, err
	}
	return Build(spec, stories(t))
}

func TestBuildLlama(t *testing.T) {
	p, err := build(t, llamaTOML(t))
	require.NoError(t, err)
	// 1 embedding + 5 blocks of 16 nodes + norm + output.
	require.Len(t, p.Nodes, 1+5*16+2)
	require.Equal(t, 512, p.Vocab)
	require.Equal(t, int64(4), p.Params["n_head_kv"])
	require.Equal(t, "logits", p.Nodes[p.Output].ID)
}

// Each broken graph gives one line naming the file, where in it, and what.
func TestBuildErrors(t *testing.T) {
	base := llamaTOML(t)
	cases := []struct {
		name, old, new string
		want           []string
	}{
		{"unknown op", `op = "silu"`, `op = "swish"`, []string{"bad.toml", "block.nodes[12]", `"act"`, `op "swish" is not a known op`}},
		{"cycle", `{ id = "h",    op = "mul",       in = ["act", "u"] }`, `{ id = "h",    op = "mul",       in = ["act", "h2"] },
  { id = "h2",   op = "add",       in = ["h", "u"] }`, []string{"bad.toml", "cycle", `"h" -> "h2" -> "h"`}},
		{"missing weight", `blk.{i}.ffn_up.weight`, `blk.{i}.ffn_upp.weight`, []string{"bad.toml", "block.nodes[11]", "block 0", "blk.0.ffn_upp.weight", "is not in", "stories260K.gguf"}},
		{"shape", `in = ["act", "u"]`, `in = ["act", "a_in"]`, []string{"bad.toml", "block.nodes[13]", "op mul", "input 1 is 64 wide but input 0 is 172 wide"}},
		{"matmul shape", `weight = "blk.{i}.ffn_down.weight"`, `weight = "blk.{i}.ffn_up.weight"`, []string{"bad.toml", "block.nodes[14]", "blk.0.ffn_up.weight", "input is 172 wide"}},
		{"missing param", `n_head    = "llama.attention.head_count"`, `n_head    = "llama.attention.heads"`, []string{"bad.toml", "params.n_head", `"llama.attention.heads"`, "missing", "stories260K.gguf"}},
		{"undefined input", `in = ["g"] }`, `in = ["gg"] }`, []string{"bad.toml", "block.nodes[12]", `input "gg"`}},
		{"unknown attr", `eps = "eps" },`, `eps = "eps", epsilon = 1 },`, []string{"bad.toml", "block.nodes[0]", `no attribute "epsilon"`}},
		{"bad enum", `n_rot = "n_rot", theta = "theta" },`, `n_rot = "n_rot", theta = "theta", mode = "spiral" },`, []string{"bad.toml", "block.nodes[4]", `"spiral" is not one of norm, neox`}},
		{"syntax", `[block]`, `[block`, []string{"bad.toml", "line"}},
		{"match number", `"llama.expert_count" = ["-", "0"] },`, `"llama.expert_count" = 0 },`, []string{"bad.toml", "match[0].llama.expert_count", "want a string or a non-empty list of strings", "integer"}},
		{"match list", `"llama.expert_count" = ["-", "0"] },`, `"llama.expert_count" = ["-", 0] },`, []string{"bad.toml", "match[0].llama.expert_count", "want a string or a non-empty list of strings"}},
		{"match empty", `"llama.expert_count" = ["-", "0"] },`, `"llama.expert_count" = [] },`, []string{"bad.toml", "match[0].llama.expert_count", "non-empty"}},
		{"unknown key", `name = "llama"`, "colour = 3\nname = \"llama\"", []string{"bad.toml", "colour", "unknown key"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			text := strings.Replace(base, c.old, c.new, 1)
			require.NotEqual(t, base, text, "the case must change the graph")
			_, err := build(t, text)
			require.Error(t, err)
			msg := err.Error()
			require.NotContains(t, msg, "\n")
			for _, w := range c.want {
				require.Contains(t, msg, w)
			}
		})
	}
}

func FuzzParseSpec(f *testing.F) {
	b, err := os.ReadFile(filepath.Join("..", "models", "llama.toml"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte("name='x'\narch='y'\n[[node]]\nid='a'\nop='add'\nin=['a','a']\n"))
	f.Fuzz(func(t *testing.T, text []byte) {
		spec, err := ParseSpec("fuzz.toml", text)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("multi-line error: %q", err)
			}
			return
		}
		// A parsed spec must bind or fail cleanly against a real model.
		f, err := gguf.Open(fixtures.Path(t, "stories260K", "stories260K.gguf"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		_, _ = Build(spec, f)
	})
}
