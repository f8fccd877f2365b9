package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/pinfer/pinfer/gguf"
	"github.com/pinfer/pinfer/internal/fixtures"
	"github.com/pinfer/pinfer/ops"
	"github.com/stretchr/testify/require"
)

// convert --type bf16 writes llama.cpp's MOSTLY_BF16 file (general.file_type
// 32, weights BF16), and the engine runs it: greedy decoding of the
// Shakespeare model continues a prompt exactly as PyTorch did.
func TestConvertBF16CLI(t *testing.T) {
	out := filepath.Join(t.TempDir(), "bf16.gguf")
	_, stderr, code := pinfer(t, "convert", fixtures.Path(t, "shakespeare-relu-6m"), "-o", out, "--type", "bf16")
	require.Zero(t, code, stderr)

	f, err := gguf.Open(out)
	require.NoError(t, err)
	ft, err := f.Uint("general.file_type")
	require.NoError(t, err)
	require.Equal(t, uint64(32), ft)
	ti, ok := f.Tensor("blk.0.ffn_up.weight")
	require.True(t, ok)
	require.Equal(t, ops.BF16, ti.Type)
	require.NoError(t, f.Close())

	var ref reference
	b, err := os.ReadFile(fixtures.Path(t, "shakespeare-relu-6m", "reference.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &ref))
	p := ref.Prompts[0]
	ids := make([]string, len(p.IDs))
	for i, id := range p.IDs {
		ids[i] = strconv.Itoa(id)
	}
	stdout, stderr, code := pinfer(t, "run", "-m", out, "--prompt-ids", strings.Join(ids, ","), "-n", "16", "--temp", "0", "--json")
	require.Zero(t, code, stderr)
	var res struct {
		Tokens []int `json:"tokens"`
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &res))
	require.Equal(t, p.GreedyIDs[:16], res.Tokens)

	// The help names the type, and other types are still refused.
	stdout, _, _ = pinfer(t, "convert", "--help")
	require.Contains(t, stdout, "bf16")
	_, stderr, code = pinfer(t, "convert", fixtures.Path(t, "shakespeare-relu-6m"), "-o", filepath.Join(t.TempDir(), "x.gguf"), "--type", "q4_1")
	require.NotZero(t, code)
	require.Contains(t, stderr, "want f32, f16, bf16, q8_0 or q4_0")
}
