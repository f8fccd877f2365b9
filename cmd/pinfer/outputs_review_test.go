package main

import (
	"crypto/sha256"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/pinfer/pinfer/internal/fixtures"
	"github.com/stretchr/testify/require"
)

// copyFile copies src into dir and returns the copy's path and the
// original's digest.
func copyFile(t *testing.T, src, dir string) (string, [32]byte) {
	t.Helper()
	b, err := os.ReadFile(src)
	require.NoError(t, err)
	dst := filepath.Join(dir, filepath.Base(src))
	require.NoError(t, os.WriteFile(dst, b, 0o644))
	return dst, sha256.Sum256(b)
}

func builtinModelFile(t *testing.T) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "models", "shakespeare-relu-6m-f16.gguf")
}

// refusedUpFront is refused, and also wants none of the work's progress on
// stderr: the fault is found before the model runs, not after.
func refusedUpFront(t *testing.T, args []string, want ...string) {
	t.Helper()
	_, stderr, _ := pinfer(t, args...)
	for _, bar := range []string{"profiling", "collecting hidden states", "training"} {
		require.NotContains(t, stderr, bar, "%v", args)
	}
	refused(t, args, want...)
}

// No output of profile, place or predictor train may be one of the
// command's inputs: writing it would destroy the model, the calibration
// text or the profile being read (the copies must still match the
// fixtures byte for byte).
func TestOutputsNeverReplaceInputs(t *testing.T) {
	dir := t.TempDir()
	model, modelSum := copyFile(t, builtinModelFile(t), dir)
	text, textSum := copyFile(t, fixtures.Path(t, "shakespeare-relu-6m", "heldout.txt"), dir)
	stats, statsSum := copyFile(t, fixtures.Path(t, "shakespeare-relu-6m", "activation_stats.json"), dir)
	// A second name of the model (a hard link) is the model too.
	link := filepath.Join(dir, "link.gguf")
	require.NoError(t, os.Link(model, link))

	for _, c := range [][]string{
		{"profile", "-m", model, "-f", text, "--max-tokens", "64", "-o", model, "--plot", filepath.Join(dir, "p.png")},
		{"profile", "-m", model, "-f", text, "--max-tokens", "64", "-o", text, "--plot", filepath.Join(dir, "p.png")},
		{"place", "-m", model, "--stats", stats, "--vram-budget", "0.005", "-o", model},
		{"place", "-m", model, "--stats", stats, "--vram-budget", "0.005", "-o", link},
		{"place", "-m", model, "--stats", stats, "--vram-budget", "0.005", "-o", stats},
		{"predictor", "train", "-m", model, "-f", text, "--max-tokens", "600", "-o", model},
		{"predictor", "train", "-m", model, "-f", text, "--max-tokens", "600", "-o", text},
	} {
		_, stderr, code := pinfer(t, c...)
		require.NotZero(t, code, "%v", c)
		lines := strings.Split(strings.TrimSpace(stderr), "\n")
		require.Len(t, lines, 1, "%v: %s", c, stderr)
		require.Contains(t, lines[0], "is the input", "%v", c)
		for path, sum := range map[string][32]byte{model: modelSum, text: textSum, stats: statsSum} {
			b, err := os.ReadFile(path)
			require.NoError(t, err)
			require.Equal(t, sum, sha256.Sum256(b), "%v changed %s", c, path)
		}
	}
}

// An output that cannot be written is refused before the work, with
// nothing left behind: not after a profile or a training run whose result
// is then lost, and not with the stats written but the plot missing.
func TestOutputsUnwritableRefusedUpFront(t *testing.T) {
	dir := t.TempDir()
	text := fixtures.Path(t, "shakespeare-relu-6m", "heldout.txt")
	stats := fixtures.Path(t, "shakespeare-relu-6m", "activation_stats.json")
	missing := filepath.Join(dir, "no-such-dir")
	st := filepath.Join(dir, "st.json")

	refusedUpFront(t, []string{"profile", "-f", text, "--max-tokens", "64", "-o", filepath.Join(missing, "st.json")}, "-o", filepath.Join(missing, "st.json"), "no such file")
	refusedUpFront(t, []string{"profile", "-f", text, "--max-tokens", "64", "-o", st, "--plot", filepath.Join(missing, "p.png")}, "--plot", filepath.Join(missing, "p.png"))
	refusedUpFront(t, []string{"profile", "-f", text, "--max-tokens", "64", "-o", dir}, "-o", dir, "directory")
	refusedUpFront(t, []string{"predictor", "train", "-f", text, "--max-tokens", "600", "-o", filepath.Join(missing, "p.gguf")}, "-o", filepath.Join(missing, "p.gguf"), "no such file")
	refusedUpFront(t, []string{"place", "--stats", stats, "--vram-budget", "0.005", "-o", filepath.Join(missing, "x.gpuidx")}, "-o", filepath.Join(missing, "x.gpuidx"))

	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries, "left behind in %s", dir)
}

// predictor eval -c 0 is the model's context (512, config.json's
// max_position_embeddings), as profile's -c 0 is and llama.cpp's
// perplexity -c 0 is, not an error blamed on the text; a window too small
// to score is refused as the flag's fault.
func TestPredictorEvalContextZero(t *testing.T) {
	text := fixtures.Path(t, "shakespeare-relu-6m", "heldout.txt")
	want, stderr, code := pinfer(t, "predictor", "eval", "-f", text, "--max-tokens", "1024", "-c", "512", "--predictor", "oracle")
	require.Zero(t, code, stderr)
	got, stderr, code := pinfer(t, "predictor", "eval", "-f", text, "--max-tokens", "1024", "-c", "0", "--predictor", "oracle")
	require.Zero(t, code, stderr)
	require.Equal(t, want, got)
	require.Contains(t, got, "over 1022 positions") // two windows of 512, 511 steps each
	refused(t, []string{"predictor", "eval", "-f", text, "-c", "2"}, "-c 2", "at least 4")
	refused(t, []string{"predictor", "eval", "-f", text, "-c", "-1"}, "-c -1")
}

// A window larger than the text (-c far past it) is the text's length: the
// KV cache is not sized for positions that never come (a -c of 1e10 made
// the profile die allocating terabytes), and the rates are those of one
// window over the whole text.
func TestProfileContextPastTheText(t *testing.T) {
	dir := t.TempDir()
	text := fixtures.Path(t, "shakespeare-relu-6m", "heldout.txt")
	read := func(c string) string {
		st := filepath.Join(dir, "c"+c+".json")
		_, stderr, code := pinfer(t, "profile", "-m", builtinModelFile(t), "-f", text, "--max-tokens", "64", "-c", c, "-o", st)
		require.Zero(t, code, stderr)
		b, err := os.ReadFile(st)
		require.NoError(t, err)
		return string(b)
	}
	a, b := read("64"), read("10000000000")
	require.True(t, a == b, "-c 1e10 profiled otherwise than -c 64, the text's length")
}
