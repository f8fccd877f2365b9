package main

import (
	"encoding/json"
	"testing"

	"github.com/pinfer/pinfer/internal/fixtures"
	"github.com/stretchr/testify/require"
)

// run --context-shift goes on past a full context; without it, run stops
// there. (engine's TestContextShift holds the tokens to fresh sessions
// over the shifted windows.)
func TestRunContextShift(t *testing.T) {
	model := fixtures.Path(t, "stories260K", "stories260K.gguf")
	var res struct {
		Tokens     []int  `json:"tokens"`
		StopReason string `json:"stop_reason"`
		Shifts     int    `json:"context_shifts"`
	}
	out, stderr, code := pinfer(t, "run", "-m", model, "-p", "Once upon a time", "-n", "120", "-c", "40", "--temp", "0", "--json")
	require.Zero(t, code, stderr)
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	require.Equal(t, "context", res.StopReason)
	require.Less(t, len(res.Tokens), 40)

	out, stderr, code = pinfer(t, "run", "-m", model, "-p", "Once upon a time", "-n", "120", "-c", "40", "--temp", "0", "--json", "--context-shift", "--keep", "-1")
	require.Zero(t, code, stderr)
	res.Shifts = 0
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	require.Equal(t, "length", res.StopReason)
	require.Len(t, res.Tokens, 120)
	require.Greater(t, res.Shifts, 2)

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--keep", "2"}, "--keep says what a context shift keeps: add --context-shift"},
		{[]string{"--context-shift", "--keep", "-3"}, "--keep -3: want a count of prompt tokens, or -1"},
	} {
		_, stderr, code := pinfer(t, append([]string{"run", "-m", model, "-p", "Once", "-n", "4"}, c.args...)...)
		require.NotZero(t, code)
		require.Contains(t, stderr, c.want)
	}
}
