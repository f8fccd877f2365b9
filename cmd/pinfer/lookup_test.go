package main

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/pinfer/pinfer/internal/fixtures"
	"github.com/stretchr/testify/require"
)

// run --lookup drafts tokens from the text and keeps PyTorch's greedy
// continuation, in fewer passes than tokens.
func TestRunLookup(t *testing.T) {
	var ref reference
	b, err := os.ReadFile(fixtures.Path(t, "shakespeare-relu-6m", "reference.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &ref))
	p := ref.Prompts[1]
	n := len(p.GreedyIDs)
	out, stderr, code := pinfer(t, "run", "-p", p.Text, "-n", "64", "--temp", "0", "--json", "--lookup", "6")
	require.Zero(t, code, stderr)
	var res struct {
		Tokens   []int `json:"tokens"`
		Drafted  int   `json:"drafted"`
		Accepted int   `json:"accepted"`
		Timings  struct {
			Runs int `json:"predicted_runs"`
		} `json:"timings"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	require.Equal(t, p.GreedyIDs[:min(n, 64)], res.Tokens[:min(n, 64)])
	require.Positive(t, res.Drafted)
	require.Equal(t, len(res.Tokens)-1-res.Accepted, res.Timings.Runs)

	_, stderr, code = pinfer(t, "run", "-p", "x", "-n", "2", "--lookup", "-1")
	require.NotZero(t, code)
	require.Contains(t, stderr, "--lookup -1: want a count of tokens to draft")
}
