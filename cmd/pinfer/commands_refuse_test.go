package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pinfer/pinfer/internal/fixtures"
	"github.com/stretchr/testify/require"
)

// refused runs pinfer and wants a non-zero exit, nothing on stdout and one
// line on stderr holding each of want.
func refused(t *testing.T, args []string, want ...string) {
	t.Helper()
	out, stderr, code := pinfer(t, args...)
	require.NotZero(t, code, "%v", args)
	require.Empty(t, out, "%v", args)
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	require.Len(t, lines, 1, "%v: %s", args, stderr)
	for _, w := range want {
		require.Contains(t, lines[0], w, "%v", args)
	}
}

// A model with no sparse FFN layers (stories260K) has nothing for a
// predictor to choose: naming one is an error, not silently ignored, and
// eval has nothing to score; no predictor, or dense, still runs.
func TestPredictorOnDenseModel(t *testing.T) {
	stories := fixtures.Path(t, "stories260K", "stories260K.gguf")
	text := filepath.Join(t.TempDir(), "t.txt")
	require.NoError(t, os.WriteFile(text, []byte(strings.Repeat("Once upon a time there was a little girl. ", 8)), 0o644))
	refused(t, []string{"predictor", "eval", "-m", stories, "-f", text, "-c", "8"}, "stories260K.gguf", "no sparse FFN layers")
	for _, p := range []string{"static", "oracle", "mlp", filepath.Join("..", "..", "plugins", "topk.go")} {
		refused(t, []string{"run", "-m", stories, "-p", "Once", "-n", "2", "--predictor", p}, "predictor "+p, "no sparse FFN layers")
	}
	for _, extra := range [][]string{nil, {"--predictor", "dense"}} {
		_, stderr, code := pinfer(t, append([]string{"run", "-m", stories, "-p", "Once", "-n", "2"}, extra...)...)
		require.Zero(t, code, "%v: %s", extra, stderr)
	}
}

// profile refuses a text that gives nothing but BOS, and a plot it cannot
// write (or one that would overwrite the stats), before profiling and
// without leaving a file.
func TestProfileRefusesUpFront(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.txt")
	require.NoError(t, os.WriteFile(empty, nil, 0o644))
	heldout := fixtures.Path(t, "shakespeare-relu-6m", "heldout.txt")
	st := filepath.Join(dir, "st.json")
	refused(t, []string{"profile", "-f", empty, "-o", st}, "empty.txt", "no tokens to profile besides BOS")
	refused(t, []string{"profile", "-f", heldout, "--max-tokens", "1", "-o", st}, "no tokens to profile besides BOS")
	refused(t, []string{"profile", "-f", heldout, "-o", st, "--plot", filepath.Join(dir, "out.txt")}, "--plot", "out.txt", `"txt"`, ".svg")
	refused(t, []string{"profile", "-f", heldout, "-o", filepath.Join(dir, "st.png")}, "-o", "st.png", "overwrite")
	names, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, names, 1, "only empty.txt: %v", names)

	// Formats gonum/plot writes pass, upper case too.
	_, stderr, code := pinfer(t, "profile", "-f", heldout, "--max-tokens", "16", "-o", st, "--plot", filepath.Join(dir, "p.SVG"))
	require.Zero(t, code, stderr)
	require.FileExists(t, filepath.Join(dir, "p.SVG"))
}

// place, like the other commands, runs on the built-in model without -m,
// and wants the budget its usage lists: without one it used to write an
// empty index.
func TestPlaceDefaultModelAndBudget(t *testing.T) {
	dir := t.TempDir()
	st := filepath.Join(dir, "st.json")
	_, stderr, code := pinfer(t, "profile", "-f", fixtures.Path(t, "shakespeare-relu-6m", "heldout.txt"), "--max-tokens", "64", "-o", st)
	require.Zero(t, code, stderr)
	idx := filepath.Join(dir, "x.gpuidx")
	refused(t, []string{"place", "--stats", st, "-o", idx}, "--vram-budget 0", "more than 0")
	refused(t, []string{"place", "--stats", st, "--vram-budget", "0", "-o", idx}, "--vram-budget 0")
	refused(t, []string{"place", "--vram-budget", "1", "-o", idx}, "--stats")
	require.NoFileExists(t, idx)
	out, stderr, code := pinfer(t, "place", "--stats", st, "--vram-budget", "0.005", "-o", idx)
	require.Zero(t, code, stderr)
	require.Contains(t, out, "neurons")
	require.FileExists(t, idx)
}
