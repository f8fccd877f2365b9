package engine

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A family graph with one mistake, loaded as a user's -g file, fails with one
// line naming the file, where in it, and what is wrong.
func TestGraphMistakes(t *testing.T) {
	base, err := os.ReadFile(filepath.Join("..", "models", "relu-falcon.toml"))
	require.NoError(t, err)
	model := convertArch(t, "falcon-relu") // 2 blocks
	cases := []struct {
		name, old, new string
		want           []string
	}{
		{"unknown op", `op = "slice",     in = ["qkv"], len`, `op = "split",     in = ["qkv"], len`,
			[]string{"block.nodes[3]", `(id "q0", block 0)`, `op "split" is not a known op (known: `}},
		{"wrong arity", `in = ["q", "k", "v"]`, `in = ["q", "k"]`,
			[]string{"block.nodes[9]", `(id "att", block 0)`, "op attention takes 3 inputs, 2 given"}},
		{"no tensor for a block", `n_layer   = "falcon.block_count"`, `n_layer   = 3`,
			[]string{"block.nodes[0]", `(id "a_in", block 2)`, "weight: tensor blk.2.attn_norm_2.weight or blk.2.attn_norm.weight is not in", "falcon-relu-f32.gguf"}},
		{"block never feeds the output", `{ id = "x",    op = "add",       in = ["x1", "f"] },`, `{ id = "y",    op = "add",       in = ["x1", "f"] },`,
			[]string{"block.nodes[13]", `(id "y", block 0)`, `nothing reads its result, so it never reaches the output "logits"`}},
		{"slice out of range", `start = "n_embd"`, `start = 500`,
			[]string{"block.nodes[4]", `(id "kv", block 0)`, "op slice: start 500 is outside the input's 192 columns"}},
		{"unknown weight slot", `gate = "blk.{i}.ffn_up.weight"`, `gates = "blk.{i}.ffn_up.weight"`,
			[]string{"block.nodes[11]", `op sparse_ffn has no attribute "gates"`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			text := strings.Replace(string(base), c.old, c.new, 1)
			require.NotEqual(t, string(base), text, "the case must change the graph")
			path := filepath.Join(t.TempDir(), "mine.toml")
			require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
			_, err := Load(model, path)
			require.Error(t, err)
			msg := err.Error()
			require.NotContains(t, msg, "\n")
			require.Contains(t, msg, path)
			for _, w := range c.want {
				require.Contains(t, msg, w)
			}
		})
	}
}
