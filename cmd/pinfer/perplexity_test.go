package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
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
	m := regexp.MustCompile(`Final estimate: PPL = ([0-9.]+) .*\((\d+) windows of (\d+) tokens`).FindStringSubmatch(out)
	require.NotNil(t, m, out)
	v, err := strconv.ParseFloat(m[1], 64)
	require.NoError(t, err)
	return v, stderr + "windows of " + m[3]
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
