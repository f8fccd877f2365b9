package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/pinfer/pinfer/internal/fixtures"
	"github.com/stretchr/testify/require"
)

// -n -2 is llama-cli's "until the context is full": its main loop stops
// at a full context before it would shift, even with --context-shift
// ("context full and n_predict == -2 => stopping"). run passes -2 on as
// Options.N < 0, which with ContextShift shifts for ever: stories260K's
// greedy text never ends, and the command never returns. Fix: in run (or
// Generate), -2 stops at a full context whatever --context-shift says.
func TestReview3NPredictFillStopsAtFullContextWithShift(t *testing.T) {
	model := fixtures.Path(t, "stories260K", "stories260K.gguf")
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "run", "-m", model, "-p", "Once upon a time", "-n", "-2", "-c", "40", "--temp", "0", "--json", "--context-shift")
	cmd.Env = append(os.Environ(), "XDG_CACHE_HOME="+t.TempDir())
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	require.NoError(t, ctx.Err(), "-n -2 --context-shift still running after 4 s: it shifts instead of stopping at the full context")
	require.NoError(t, err, e.String())
	var res struct {
		Tokens     []int  `json:"tokens"`
		StopReason string `json:"stop_reason"`
		Shifts     int    `json:"context_shifts"`
	}
	require.NoError(t, json.Unmarshal(o.Bytes(), &res))
	require.Contains(t, []string{"context", "eos"}, res.StopReason)
	require.Zero(t, res.Shifts)
}

// -cnv with --context-shift: a reply that runs past the context shifts
// (the flag is taken), but the next turn renders the whole conversation
// again, which is now longer than the context, and reply() refuses it
// ("this turn does not fit in the context"), and so every turn after it:
// the conversation is stuck, the user typing turns that are never
// answered, and the "context is full: start again" exit never comes since
// a shifted reply does not stop with "context". Either refuse
// --context-shift with -cnv, or go on from the shifted session (render
// only the new turn, or drop the oldest messages until it fits).
func TestReview3ConversationGoesOnAfterAShift(t *testing.T) {
	model := fixtures.Path(t, "stories260K", "stories260K.gguf")
	out, stderr, code := pinferStdinCode(t, "Tell me more.\n", "run", "-m", model, "-cnv", "-p", "Once upon a time", "-n", "100", "-c", "64", "--temp", "0", "--context-shift")
	if code != 0 {
		// Refused up front: fine, if it says why before any reply.
		require.Contains(t, stderr, "context-shift")
		require.NotContains(t, out, "\n> ")
		return
	}
	require.NotContains(t, stderr, "this turn does not fit", "the second turn was refused after the first reply shifted:\n%s", stderr)
	parts := strings.Split(out, "\n> ")
	require.GreaterOrEqual(t, len(parts), 2, out)
	require.NotEmpty(t, strings.TrimSpace(strings.TrimPrefix(parts[1], "Tell me more.")), "no reply to the second turn: %q", out)
}
