package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pinfer/pinfer/internal/fixtures"
)

// -md: a q4_0 copy of the built-in model drafts for it; the greedy tokens
// are still PyTorch's (reference.json), in fewer passes.
func TestRunModelDraft(t *testing.T) {
	b, err := os.ReadFile(fixtures.Path(t, "shakespeare-relu-6m", "reference.json"))
	require.NoError(t, err)
	var ref struct {
		Prompts []struct {
			IDs       []int `json:"ids"`
			GreedyIDs []int `json:"greedy_ids"`
		} `json:"prompts"`
	}
	require.NoError(t, json.Unmarshal(b, &ref))
	model := filepath.Join("..", "..", "models", "shakespeare-relu-6m-f16.gguf")
	draft := filepath.Join(t.TempDir(), "draft.gguf")
	_, stderr, code := pinfer(t, "quantize", model, draft, "q4_0")
	require.Zero(t, code, stderr)

	p := ref.Prompts[0]
	var parts []string
	for _, id := range p.IDs {
		parts = append(parts, strconv.Itoa(id))
	}
	ids := strings.Join(parts, ",")
	// The f16 model's greedy tokens: PyTorch's in fp32 but where the top
	// two are close; compare with the f16 model's own run without a draft.
	plain, stderr, code := pinfer(t, "run", "--prompt-ids", ids, "-n", "48", "--temp", "0", "--json")
	require.Zero(t, code, stderr)
	spec, stderr, code := pinfer(t, "run", "--prompt-ids", ids, "-n", "48", "--temp", "0", "--json", "-md", draft, "--draft-max", "5")
	require.Zero(t, code, stderr)
	var a, d struct {
		Tokens   []int `json:"tokens"`
		Drafted  int   `json:"drafted"`
		Accepted int   `json:"accepted"`
	}
	require.NoError(t, json.Unmarshal([]byte(plain), &a))
	require.NoError(t, json.Unmarshal([]byte(spec), &d))
	require.Equal(t, p.GreedyIDs[:16], a.Tokens[:16])
	require.Equal(t, a.Tokens, d.Tokens)
	require.Greater(t, d.Accepted, 16)
	require.LessOrEqual(t, d.Accepted, d.Drafted)

	for args, want := range map[string]string{
		"-md " + draft + " --lookup 3":                               "--lookup and --model-draft each draft the tokens",
		"-md " + draft + " --draft-max 0":                            "--draft-max 0: want at least 1 token",
		"-md " + draft + " --draft-p-min 2":                          "--draft-p-min 2: want a probability in [0, 1]",
		"-md " + fixtures.Path(t, "stories260K", "stories260K.gguf"): "a draft must share the model's vocabulary",
		"-md " + filepath.Join(t.TempDir(), "none.gguf"):             "--model-draft: ",
	} {
		_, stderr, code := pinfer(t, append([]string{"run", "-p", "hi", "-n", "2"}, strings.Fields(args)...)...)
		require.NotZero(t, code, args)
		require.Contains(t, stderr, want, args)
	}
}
