package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/pinfer/pinfer/internal/fixtures"
	"github.com/stretchr/testify/require"
)

// pplText is the first n bytes of the held-out Shakespeare text, in a file.
func pplText(t *testing.T, n int) string {
	t.Helper()
	b, err := os.ReadFile(fixtures.Path(t, "shakespeare-relu-6m", "heldout.txt"))
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "text.txt")
	require.NoError(t, os.WriteFile(path, b[:n], 0o644))
	return path
}

// ppl runs perplexity and returns its final estimate and stderr.
func ppl(t *testing.T, args ...string) (float64, string) {
	t.Helper()
	out, stderr, code := pinfer(t, append([]string{"perplexity"}, args...)...)
	require.Zero(t, code, "%v: %s", args, stderr)
	m := regexp.MustCompile(`(?m)^(\d+) chunks of (\d+) tokens, .*\nFinal estimate: PPL = ([0-9.]+) \+/- [0-9.]+\n`).FindStringSubmatch(out)
	require.NotNil(t, m, out)
	v, err := strconv.ParseFloat(m[3], 64)
	require.NoError(t, err)
	return v, stderr + "windows of " + m[2]
}

// perplexity scores the path the predictor gives, as run would, mlp by
// default when the file has fc1/fc2; it used to score every model dense
// whatever --predictor said, and took any name.
func TestPerplexityUsesPredictor(t *testing.T) {
	model := filepath.Join(t.TempDir(), "g.gguf")
	_, stderr, code := pinfer(t, "gen", "--n-embd", "256", "--n-ff", "704", "--n-layer", "2", "--n-head", "4", "--vocab", "512", "--type", "f16", "-o", model)
	require.Zero(t, code, stderr)
	text := pplText(t, 2500)
	args := []string{"-m", model, "-f", text, "-c", "32", "-t", "1"}

	// The oracle is exact on this model (ReLU: the neurons it leaves out
	// are the zeros), as eval's recall and precision of 1 show: its
	// perplexity is dense's.
	out, stderr, code := pinfer(t, append([]string{"predictor", "eval", "--predictor", "oracle"}, args...)...)
	require.Zero(t, code, stderr)
	require.Contains(t, out, "mean recall 1.0000")
	require.Regexp(t, `(?m)^0 +1\.0000 +1\.0000 `, out)
	dense, _ := ppl(t, append(args, "--predictor", "dense")...)
	oracle, _ := ppl(t, append(args, "--predictor", "oracle")...)
	require.InEpsilon(t, dense, oracle, 1e-6)

	// mlp misses neurons (recall ~0.4 on random weights): its perplexity
	// moves, it is the default, and eval, feeding one token at a time,
	// finds the same figure for the sparse path.
	mlp, _ := ppl(t, append(args, "--predictor", "mlp")...)
	def, _ := ppl(t, args...)
	require.NotEqual(t, dense, mlp)
	require.Equal(t, mlp, def)
	out, stderr, code = pinfer(t, append([]string{"predictor", "eval"}, args...)...)
	require.Zero(t, code, stderr)
	m := regexp.MustCompile(`perplexity: dense ([0-9.]+), sparse ([0-9.]+)`).FindStringSubmatch(out)
	require.NotNil(t, m, out)
	require.Equal(t, strconv.FormatFloat(dense, 'f', 4, 64), m[1])
	require.Equal(t, strconv.FormatFloat(mlp, 'f', 4, 64), m[2])

	refused(t, append([]string{"perplexity", "--predictor", "bogus"}, args...), "bogus", "not a built-in")
}

// -c 0 is the model's context (it was "a context of 0 is too small"),
// a context past training warns, and one past memory is refused before
// the KV cache is made; a negative one is refused.
func TestPerplexityContext(t *testing.T) {
	text := pplText(t, 6000) // ~2700 tokens of the built-in model's
	zero, info := ppl(t, "-f", text, "-c", "0")
	require.Contains(t, info, "windows of 512") // the built-in model's trained context
	require.NotContains(t, info, "warning")
	at512, _ := ppl(t, "-f", text, "-c", "512")
	require.Equal(t, at512, zero)

	_, info = ppl(t, "-f", text, "-c", "600")
	require.Contains(t, info, "warning: the model was trained on 512 positions; a context of 600 goes past them")

	refused(t, []string{"perplexity", "-f", text, "-c", "100000000000"}, "-c 100000000000", "GB of KV cache")
	refused(t, []string{"perplexity", "-f", text, "-c", "-1"}, "-c -1", "0 for the model's")
}

// pplRun is perplexity's stdout split as llama-perplexity prints it: the
// running perplexity after each chunk ("[1]x.xxxx,[2]y.yyyy," on one
// line), the chunk count, and "Final estimate: PPL = x +/- y" alone on its
// line (%.4f +/- %.5f).
func pplRun(t *testing.T, args ...string) (running []string, chunks int, final, unc string) {
	t.Helper()
	out, stderr, code := pinfer(t, append([]string{"perplexity"}, args...)...)
	require.Zero(t, code, "%v: %s", args, stderr)
	m := regexp.MustCompile(`^((?:\[\d+\]\d+\.\d{4},)+)\n(\d+) chunks of \d+ tokens, \d+ of \d+ tokens scored\nFinal estimate: PPL = (\d+\.\d{4}) \+/- (\d+\.\d{5})\n$`).FindStringSubmatch(out)
	require.NotNil(t, m, "%v: %q", args, out)
	for i, f := range strings.Split(strings.TrimSuffix(m[1], ","), ",") {
		prefix := "[" + strconv.Itoa(i+1) + "]"
		require.True(t, strings.HasPrefix(f, prefix), "%v: %q", args, m[1])
		running = append(running, strings.TrimPrefix(f, prefix))
	}
	chunks, err := strconv.Atoi(m[2])
	require.NoError(t, err)
	require.Len(t, running, chunks)
	return running, chunks, m[3], m[4]
}

// --chunks N scores only the first N chunks, as llama-perplexity's does:
// -1 (the default) or a count past the text's chunks scores them all, and
// the estimate of N chunks is the running figure after chunk N of the whole
// run (the last running figure is the final estimate). 0 is refused, and
// the text must still hold two windows whatever --chunks says.
func TestPerplexityChunks(t *testing.T) {
	text := pplText(t, 6000) // ~2700 tokens of the built-in model's
	args := []string{"-f", text, "-c", "256"}
	all, n, final, unc := pplRun(t, args...)
	require.Greater(t, n, 4)
	require.Equal(t, all[n-1], final)
	require.NotEqual(t, "0.00000", unc)

	for _, c := range []string{"-1", "-3", strconv.Itoa(n), "100000"} {
		got, gn, gfinal, gunc := pplRun(t, append(args, "--chunks", c)...)
		require.Equal(t, all, got, "--chunks %s", c)
		require.Equal(t, n, gn)
		require.Equal(t, final, gfinal)
		require.Equal(t, unc, gunc)
	}
	for _, k := range []int{1, 3} {
		got, gn, gfinal, _ := pplRun(t, append(args, "--chunks", strconv.Itoa(k))...)
		require.Equal(t, k, gn)
		require.Equal(t, all[:k], got, "--chunks %d", k)
		require.Equal(t, all[k-1], gfinal, "--chunks %d", k)
	}

	refused(t, append([]string{"perplexity", "--chunks", "0"}, args...), "--chunks 0", "-1 for all")
	refused(t, append([]string{"perplexity", "--chunks", "x"}, args...), "--chunks")
	refused(t, []string{"perplexity", "-f", pplText(t, 400), "-c", "128", "--chunks", "1"}, "needs at least 256")
}
