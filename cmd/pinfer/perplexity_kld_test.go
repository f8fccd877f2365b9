package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// genSparse writes a small random-weight model whose mlp predictor misses
// neurons (recall ~0.4), as TestPerplexityUsesPredictor's.
func genSparse(t *testing.T) string {
	t.Helper()
	model := filepath.Join(t.TempDir(), "g.gguf")
	_, stderr, code := pinfer(t, "gen", "--n-embd", "256", "--n-ff", "704", "--n-layer", "2", "--n-head", "4", "--vocab", "512", "--type", "f16", "-o", model)
	require.Zero(t, code, stderr)
	return model
}

// kldOut is perplexity --kl-divergence's stdout as llama-perplexity prints
// it: the table (its header, a line a chunk), a blank line, then the three
// blocks of statistics; it returns the table's lines and the statistics by
// their label ("Mean    KLD", "99.9%   KLD", "Same top p", ...), each a
// value and an uncertainty (0 where the line has none).
func kldOut(t *testing.T, out string) (rows []string, stats map[string][2]float64) {
	t.Helper()
	table, rest, ok := strings.Cut(out, "\n\n")
	require.True(t, ok, out)
	lines := strings.Split(table, "\n")
	require.Equal(t, "chunk             PPL               ln(PPL(Q)/PPL(base))          KL Divergence              Δp RMS            Same top p", lines[0])
	row := regexp.MustCompile(`^ {0,3}\d+ +\d+\.\d{4} ± +\d+\.\d{4} +-?\d+\.\d{5} ± +\d+\.\d{5} +-?\d+\.\d{5} ± +\d+\.\d{5} +\d+\.\d{3} ± +\d+\.\d{3} % +\d+\.\d{3} ± +\d+\.\d{3} %$`)
	for i, l := range lines[1:] {
		require.Regexp(t, row, l)
		require.True(t, strings.HasPrefix(strings.TrimLeft(l, " "), strconv.Itoa(i+1)+" "), l)
	}
	want := []string{
		"====== Perplexity statistics ======",
		"Mean PPL(Q)                   :", "Mean PPL(base)                :", "Cor(ln(PPL(Q)), ln(PPL(base))):",
		"Mean ln(PPL(Q)/PPL(base))     :", "Mean PPL(Q)/PPL(base)         :", "Mean PPL(Q)-PPL(base)         :",
		"",
		"====== KL divergence statistics ======",
		"Mean    KLD:", "Maximum KLD:", "99.9%   KLD:", "99.0%   KLD:", "95.0%   KLD:", "90.0%   KLD:", "Median  KLD:",
		"10.0%   KLD:", " 5.0%   KLD:", " 1.0%   KLD:", " 0.1%   KLD:", "Minimum KLD:",
		"",
		"====== Token probability statistics ======",
		"Mean    Δp:", "Maximum Δp:", "99.9%   Δp:", "99.0%   Δp:", "95.0%   Δp:", "90.0%   Δp:", "75.0%   Δp:", "Median  Δp:",
		"25.0%   Δp:", "10.0%   Δp:", " 5.0%   Δp:", " 1.0%   Δp:", " 0.1%   Δp:", "Minimum Δp:",
		"RMS Δp    :", "Same top p:",
	}
	got := strings.Split(strings.TrimSuffix(rest, "\n"), "\n")
	require.Len(t, got, len(want), rest)
	num := regexp.MustCompile(`^ *(-?\d+\.\d+)(?:%| ± +(\d+\.\d+)(?: %)?)?$`)
	stats = map[string][2]float64{}
	for i, w := range want {
		if w == "" || strings.HasPrefix(w, "======") {
			require.Equal(t, w, got[i])
			continue
		}
		require.True(t, strings.HasPrefix(got[i], w), "%q: want %q", got[i], w)
		m := num.FindStringSubmatch(strings.TrimPrefix(got[i], w))
		require.NotNil(t, m, got[i])
		v, err := strconv.ParseFloat(m[1], 64)
		require.NoError(t, err)
		var u float64
		if m[2] != "" {
			u, err = strconv.ParseFloat(m[2], 64)
			require.NoError(t, err)
		}
		stats[strings.TrimSpace(strings.TrimSuffix(w, ":"))] = [2]float64{v, u}
	}
	return lines[1:], stats
}

// The two runs of the help's typical use: a dense run writes the base file
// (and prints the dense perplexity), then the sparse path (mlp, the
// default) is compared with it. Against its own base the dense path's KLD
// is the storage error's and its top token always the same; the sparse
// path drifts. The PPLs the KL run prints are the plain runs' (each scored
// by its own code: the scoring loop for the plain run, the KL statistics
// for the other), and the file's chunks and size are used without -f or -c.
func TestPerplexityKLDivergence(t *testing.T) {
	model := genSparse(t)
	text := pplText(t, 2500)
	dir := t.TempDir()
	base := filepath.Join(dir, "base.kld")
	args := []string{"-m", model, "-f", text, "-c", "32", "-t", "1"}

	dense, _ := ppl(t, append(args, "--predictor", "dense")...)
	mlp, _ := ppl(t, args...)
	written, info := ppl(t, append(args, "--predictor", "dense", "--kl-divergence-base", base)...)
	require.Equal(t, dense, written)
	require.Contains(t, info, "wrote the log-probabilities of")
	st, err := os.Stat(base)
	require.NoError(t, err)
	require.Greater(t, st.Size(), int64(20))

	kld := func(extra ...string) ([]string, map[string][2]float64) {
		t.Helper()
		out, stderr, code := pinfer(t, append([]string{"perplexity", "--kl-divergence-base", base, "--kl-divergence", "-t", "1", "-m", model}, extra...)...)
		require.Zero(t, code, stderr)
		return kldOut(t, out)
	}
	rows, self := kld("-f", text, "--predictor", "dense")
	require.GreaterOrEqual(t, len(rows)*15, 100)
	require.InDelta(t, 0, self["Mean    KLD"][0], 1e-5)
	require.LessOrEqual(t, self["Maximum KLD"][0], 0.000123)
	require.Equal(t, [2]float64{100, 0}, self["Same top p"])
	require.InEpsilon(t, dense, self["Mean PPL(Q)"][0], 1e-6)
	require.InDelta(t, 0, self["RMS Δp"][0], 0.01)

	// The default path is mlp's. On random weights its distributions stay
	// near uniform, so the drift is small but past the storage error's.
	rows2, sparse := kld("-f", text)
	require.Len(t, rows2, len(rows))
	require.Greater(t, sparse["Mean    KLD"][0], 5e-5)
	require.Greater(t, sparse["Mean    KLD"][0], 5*sparse["Mean    KLD"][1])
	require.InEpsilon(t, mlp, sparse["Mean PPL(Q)"][0], 1e-6)
	require.InEpsilon(t, dense, sparse["Mean PPL(base)"][0], 1e-3)
	require.InEpsilon(t, mlp/dense, sparse["Mean PPL(Q)/PPL(base)"][0], 1e-3)
	require.Greater(t, sparse["Maximum KLD"][0], sparse["Median  KLD"][0])
	require.GreaterOrEqual(t, sparse["Median  KLD"][0], sparse["Minimum KLD"][0])
	t.Logf("gen model, dense vs mlp: mean KLD %.6f, same top %.2f%%", sparse["Mean    KLD"][0], sparse["Same top p"][0])

	// Without -f (the file's tokens) and with -c the file's: the same.
	out1, _, code := pinfer(t, "perplexity", "--kl-divergence-base", base, "--kl-divergence", "-t", "1", "-m", model)
	require.Zero(t, code)
	out2, _, code := pinfer(t, "perplexity", "--kl-divergence-base", base, "--kl-divergence", "-t", "1", "-m", model, "-f", text, "-c", "32")
	require.Zero(t, code)
	require.Equal(t, out1, out2)
	_, again := kldOut(t, out1)
	require.Equal(t, sparse, again)

	// --chunks 2 of the file's: the table's first two lines.
	out3, _, code := pinfer(t, "perplexity", "--kl-divergence-base", base, "--kl-divergence", "-t", "1", "-m", model, "--chunks", "2")
	require.Zero(t, code)
	require.Equal(t, strings.Join(strings.Split(out1, "\n")[:3], "\n")+"\n\n", out3)
}

// Every mismatch between the base file and this run is one line naming
// the file and what differs, with a non-zero exit; so is --kl-divergence
// without a base file, and a base file that would replace an input.
func TestPerplexityKLDivergenceRefusals(t *testing.T) {
	model := genSparse(t)
	text := pplText(t, 2500)
	dir := t.TempDir()
	base := filepath.Join(dir, "base.kld")
	args := []string{"-m", model, "-f", text, "-c", "32", "-t", "1"}
	_, _, code := pinfer(t, append([]string{"perplexity", "--predictor", "dense", "--kl-divergence-base", base}, args...)...)
	require.Zero(t, code)
	kl := func(extra ...string) []string {
		return append([]string{"perplexity", "--kl-divergence", "-t", "1"}, extra...)
	}

	refused(t, kl("-m", model, "-f", text), "--kl-divergence needs --kl-divergence-base FILE")
	refused(t, kl("-m", model, "--kl-divergence-base", text), text, "not a llama-perplexity log-probability file")
	refused(t, kl("--kl-divergence-base", base), base, "vocabulary of 512 tokens", "the model's has 1024") // the built-in model
	refused(t, kl("-m", model, "--kl-divergence-base", base, "-c", "64"), base, "context of 32", "-c 64")
	other := filepath.Join(dir, "other.txt")
	b, err := os.ReadFile(text)
	require.NoError(t, err)
	b[300] ^= 0x20 // a letter's case
	require.NoError(t, os.WriteFile(other, b, 0o644))
	refused(t, kl("-m", model, "--kl-divergence-base", base, "-f", other), base, "token ", "other.txt has")
	short := filepath.Join(dir, "short.txt")
	require.NoError(t, os.WriteFile(short, b[:200], 0o644))
	refused(t, kl("-m", model, "--kl-divergence-base", base, "-f", short), base, "short.txt only")
	raw, err := os.ReadFile(base)
	require.NoError(t, err)
	cut := filepath.Join(dir, "cut.kld")
	require.NoError(t, os.WriteFile(cut, raw[:len(raw)-100], 0o644))
	refused(t, kl("-m", model, "--kl-divergence-base", cut), cut, "truncated")
	refused(t, kl("-m", model, "--kl-divergence-base", filepath.Join(dir, "none.kld")), "none.kld", "no such file")

	refused(t, append([]string{"perplexity", "--kl-divergence-base", model}, args...), "--kl-divergence-base", "is the input -m")
	refused(t, append([]string{"perplexity", "--kl-divergence-base", base, "--ppl-stride", "8"}, args...), "--ppl-stride with --kl-divergence-base")
	// A failed run leaves the base file as it was.
	tiny := filepath.Join(dir, "tiny.txt")
	require.NoError(t, os.WriteFile(tiny, b[:30], 0o644))
	refused(t, []string{"perplexity", "-m", model, "-f", tiny, "-c", "32", "--kl-divergence-base", base}, "needs at least 64")
	again, err := os.ReadFile(base)
	require.NoError(t, err)
	require.Equal(t, raw, again)
}

// --ppl-stride N is llama-perplexity's strided perplexity: the context
// grows by N/2 (said on stderr), windows of that size start N apart, each
// scoring the N tokens it adds; (tokens - window + N - 1)/N of them. With
// -c 97 --ppl-stride 63 the window is 128 and scores its positions 64..126,
// as the standard chunk of 128 does: the first chunks agree.
func TestPerplexityStride(t *testing.T) {
	text := pplText(t, 6000) // ~2700 tokens of the built-in model's
	out, stderr, code := pinfer(t, "perplexity", "-f", text, "-c", "97", "--ppl-stride", "63", "-t", "1")
	require.Zero(t, code, stderr)
	require.Contains(t, stderr, "the context goes from 97 to 128")
	m := regexp.MustCompile(`^((?:\[\d+\]\d+\.\d{4},)+)\n(\d+) chunks of 128 tokens, stride 63, (\d+) of (\d+) tokens scored\nFinal estimate: PPL = (\d+\.\d{4}) \+/- \d+\.\d{5}\n$`).FindStringSubmatch(out)
	require.NotNil(t, m, out)
	chunks, _ := strconv.Atoi(m[2])
	scored, _ := strconv.Atoi(m[3])
	tokens, _ := strconv.Atoi(m[4])
	require.Equal(t, (tokens-128+62)/63, chunks)
	require.Equal(t, 63*chunks, scored)
	running := strings.Split(strings.TrimSuffix(m[1], ","), ",")
	require.Len(t, running, chunks)
	require.Equal(t, "["+m[2]+"]"+m[5], running[chunks-1])

	std, _, _, _ := pplRun(t, "-f", text, "-c", "128", "--chunks", "1", "-t", "1")
	require.Equal(t, "[1]"+std[0], running[0])

	refused(t, []string{"perplexity", "-f", text, "--ppl-stride", "0"}, "--ppl-stride 0", "at least 1")
	refused(t, []string{"perplexity", "-f", text, "-c", "128", "--ppl-stride", "255"}, "--ppl-stride 255", "past the 254 that -c 128 allows")
	_, stderr, code = pinfer(t, "perplexity", "-f", text, "-c", "128", "--ppl-stride", "254", "--chunks", "1", "-t", "1")
	require.Zero(t, code, stderr)
}

// On the built-in Shakespeare model, a sparse path that computes every
// other neuron (a plugin; the file has no fc1/fc2) drifts far from the
// dense base: the KLD is large and the top token often differs, where the
// dense path against its own base shows only the storage error.
func TestPerplexityKLDivergenceSparseShakespeare(t *testing.T) {
	dir := t.TempDir()
	plugin := filepath.Join(dir, "half.go")
	require.NoError(t, os.WriteFile(plugin, []byte(`//go:build pinfer_plugin

package half

import "pinfer/host"

func Predict(l host.Layer, in host.Input) []int32 {
	ids := make([]int32, 0, l.NFF/2)
	for i := 0; i < l.NFF; i += 2 {
		ids = append(ids, int32(i))
	}
	return ids
}
`), 0o644))
	text := pplText(t, 2500)
	base := filepath.Join(dir, "base.kld")
	_, stderr, code := pinfer(t, "perplexity", "-f", text, "-c", "64", "-t", "1", "--kl-divergence-base", base)
	require.Zero(t, code, stderr)
	run := func(extra ...string) map[string][2]float64 {
		out, stderr, code := pinfer(t, append([]string{"perplexity", "-f", text, "-t", "1", "--kl-divergence-base", base, "--kl-divergence"}, extra...)...)
		require.Zero(t, code, stderr)
		_, stats := kldOut(t, out)
		return stats
	}
	self := run()
	require.InDelta(t, 0, self["Mean    KLD"][0], 1e-5)
	require.Equal(t, [2]float64{100, 0}, self["Same top p"])
	half := run("--predictor", plugin)
	require.Greater(t, half["Mean    KLD"][0], 0.1)
	require.Less(t, half["Same top p"][0], 90.0)
	require.Greater(t, half["RMS Δp"][0], 1.0)
	t.Logf("shakespeare, dense vs half the neurons: mean KLD %.4f ± %.4f, same top %.2f%%, RMS Δp %.2f%%",
		half["Mean    KLD"][0], half["Mean    KLD"][1], half["Same top p"][0], half["RMS Δp"][0])
}
