package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/pinfer/pinfer/internal/fixtures"
	"github.com/pinfer/pinfer/ops/avx2"
	"github.com/stretchr/testify/require"
)

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "pinfer-cli-")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "pinfer")
	if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		panic(string(out))
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func pinfer(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), "XDG_CACHE_HOME="+t.TempDir())
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return o.String(), e.String(), code
}

type reference struct {
	Prompts []struct {
		Text       string    `json:"text"`
		IDs        []int     `json:"ids"`
		GreedyIDs  []int     `json:"greedy_ids"`
		LastLogits []float32 `json:"last_logits"`
	} `json:"prompts"`
}

// The README's first command: the built-in model (f16, lossless from the
// checkpoint) continues a prompt exactly as PyTorch does.
func TestRunDefaultModelJSON(t *testing.T) {
	var ref reference
	b, err := os.ReadFile(fixtures.Path(t, "shakespeare-relu-6m", "reference.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &ref))
	p := ref.Prompts[1]

	out, stderr, code := pinfer(t, "run", "-p", p.Text, "-n", "24", "--temp", "0", "--json", "--top-logits", "5")
	require.Zero(t, code, stderr)
	var res struct {
		PromptTokens []int  `json:"prompt_tokens"`
		Tokens       []int  `json:"tokens"`
		Text         string `json:"text"`
		TopLogits    []struct {
			ID    int
			Logit float32
		} `json:"top_logits"`
		Timings map[string]float64 `json:"timings"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	require.Equal(t, p.IDs, res.PromptTokens)
	require.Equal(t, p.GreedyIDs[:24], res.Tokens)
	require.NotEmpty(t, res.Text)
	require.Contains(t, res.Timings, "predicted_per_second")

	order := make([]int, len(p.LastLogits))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return p.LastLogits[order[a]] > p.LastLogits[order[b]] })
	require.Len(t, res.TopLogits, 5)
	for k, tl := range res.TopLogits {
		require.Equal(t, order[k], tl.ID)
		require.InDelta(t, p.LastLogits[order[k]], tl.Logit, 2e-3)
	}

	// Streaming mode prints the prompt, the same continuation, then timings.
	out, stderr, code = pinfer(t, "run", "-p", p.Text, "-n", "24", "--temp", "0")
	require.Zero(t, code, stderr)
	require.Equal(t, p.Text+res.Text, out)
	require.Contains(t, stderr, "tokens per second")
}

// --prompt-ids feeds ids as given; the continuation is PyTorch's.
func TestRunPromptIDs(t *testing.T) {
	var ref reference
	b, err := os.ReadFile(fixtures.Path(t, "shakespeare-relu-6m", "reference.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &ref))
	p := ref.Prompts[2]
	ids := make([]string, len(p.IDs))
	for i, id := range p.IDs {
		ids[i] = strconv.Itoa(id)
	}
	out, stderr, code := pinfer(t, "run", "--prompt-ids", strings.Join(ids, ","), "-n", "16", "--temp", "0", "--json")
	require.Zero(t, code, stderr)
	var res struct {
		PromptTokens []int `json:"prompt_tokens"`
		Tokens       []int `json:"tokens"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	require.Equal(t, p.IDs, res.PromptTokens)
	require.Equal(t, p.GreedyIDs[:16], res.Tokens)

	_, stderr, code = pinfer(t, "run", "--prompt-ids", "1,x", "-n", "1")
	require.NotZero(t, code)
	require.Contains(t, stderr, `--prompt-ids "1,x": "x" is not an integer`)
	_, stderr, code = pinfer(t, "run", "--prompt-ids", "1,99999", "-n", "1")
	require.NotZero(t, code)
	require.Contains(t, stderr, "99999 is outside the vocabulary")
}

func TestTokenize(t *testing.T) {
	out, stderr, code := pinfer(t, "tokenize", "-p", "ROMEO:", "--json")
	require.Zero(t, code, stderr)
	require.JSONEq(t, "[1, 870, 983]", out)
}

// Bad input: a non-zero exit and one line on stderr that names the file and
// what is wrong in it, never a panic.
func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	stories, err := os.ReadFile(fixtures.Path(t, "stories260K", "stories260K.gguf"))
	require.NoError(t, err)
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, b, 0o644))
		return p
	}
	truncated := write("truncated.gguf", stories[:3000])
	pastEnd := write("pastend.gguf", stories[:len(stories)*3/4])
	badType := append([]byte(nil), stories...)
	i := bytes.Index(badType, []byte("token_embd.weight"))
	require.Positive(t, i)
	// name, then n_dims (u32) and two u64 dims, then the type id.
	badType[i+len("token_embd.weight")+4+16] = 99
	unknownType := write("dtype.gguf", badType)

	llama, err := os.ReadFile(filepath.Join("..", "..", "models", "llama.toml"))
	require.NoError(t, err)
	badOp := write("badop.toml", bytes.Replace(llama, []byte(`op = "silu"`), []byte(`op = "silly"`), 1))
	gpt2 := filepath.Join(dir, "gpt2")
	require.NoError(t, os.Mkdir(gpt2, 0o755))
	write("gpt2/config.json", []byte(`{"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"]}`))
	short := write("short.txt", []byte("Once upon a time."))

	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"truncated gguf", []string{"run", "-m", truncated}, []string{"truncated.gguf"}},
		{"tensor past end", []string{"run", "-m", pastEnd}, []string{"pastend.gguf", "tensor", "past the end"}},
		{"unknown dtype", []string{"run", "-m", unknownType}, []string{"dtype.gguf", "token_embd.weight", "99"}},
		{"missing file", []string{"run", "-m", filepath.Join(dir, "nope.gguf")}, []string{"nope.gguf"}},
		{"unknown op", []string{"run", "-m", fixtures.Path(t, "stories260K", "stories260K.gguf"), "-g", badOp}, []string{"badop.toml", "block.nodes[12]", `"silly"`}},
		{"unsupported architecture", []string{"convert", gpt2, "-o", filepath.Join(dir, "x.gguf")}, []string{"config.json", "gpt2"}},
		{"bad KV cache type", []string{"run", "-m", fixtures.Path(t, "stories260K", "stories260K.gguf"), "--kv-type", "q4_0"}, []string{"--kv-type", "q4_0"}},
		{"bad convert type", []string{"convert", gpt2, "-o", filepath.Join(dir, "x.gguf"), "--type", "q3"}, []string{"--type", "q3"}},
		{"short perplexity text", []string{"perplexity", "-m", fixtures.Path(t, "stories260K", "stories260K.gguf"), "-f", short, "-c", "64"}, []string{"short.txt", "at least 128"}},
		{"negative profile window", []string{"profile", "-f", short, "-o", filepath.Join(dir, "p.json"), "-c", "-4"}, []string{"-c -4", "window size"}},
		{"negative profile tokens", []string{"profile", "-f", short, "-o", filepath.Join(dir, "p.json"), "--max-tokens", "-5"}, []string{"--max-tokens -5"}},
		{"negative eval tokens", []string{"predictor", "eval", "-f", short, "--max-tokens", "-3"}, []string{"--max-tokens -3"}},
		{"hold-out share past 1", []string{"predictor", "train", "-f", short, "-o", filepath.Join(dir, "t.gguf"), "--holdout", "1.5"}, []string{"--holdout 1.5", "(0, 1)"}},
		{"negative sparse cost", []string{"place", "-m", unknownType, "--stats", short, "--vram-budget", "1", "--sparse-cost", "-2"}, []string{"--sparse-cost -2", "positive"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			stdout, stderr, code := pinfer(t, c.args...)
			require.NotZero(t, code, "stdout: %s", stdout)
			require.NotContains(t, stderr, "panic")
			lines := strings.Split(strings.TrimSpace(stderr), "\n")
			require.Len(t, lines, 1, "stderr: %s", stderr)
			for _, w := range c.want {
				require.Contains(t, lines[0], w)
			}
		})
	}
}

// Sampling is reproducible under --seed, as llama.cpp's.
func TestRunSeed(t *testing.T) {
	args := []string{"run", "-p", "ROMEO:", "-n", "24", "--temp", "1", "--seed", "7"}
	a, stderr, code := pinfer(t, args...)
	require.Zero(t, code, stderr)
	b, _, _ := pinfer(t, args...)
	require.Equal(t, a, b)
	require.Greater(t, len(a), len("ROMEO:"))
}

// tableMedians reads bench's md table: "mode test threads" -> median t/s.
func tableMedians(t *testing.T, out string) map[string]float64 {
	median := map[string]float64{}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Split(line, "|")
		if len(f) < 10 || !strings.HasPrefix(strings.TrimSpace(f[7]), "pp") && !strings.HasPrefix(strings.TrimSpace(f[7]), "tg") {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(f[9]), 64)
		require.NoError(t, err, line)
		median[strings.TrimSpace(f[6])+" "+strings.TrimSpace(f[7])+" "+strings.TrimSpace(f[5])] = v
	}
	return median
}

// bench's summary line for each mode is the ratio of the table's medians:
// its prefill's t/s against its decode's.
func TestBenchRatios(t *testing.T) {
	out, stderr, code := pinfer(t, "bench", "-p", "8", "-n", "4", "-r", "1", "--mode", "dense,oracle")
	require.Equal(t, 0, code, stderr)
	median := map[string]float64{} // mode and test kind -> median t/s
	for k, v := range tableMedians(t, out) {
		f := strings.Fields(k)
		median[f[0]+" "+f[1][:2]] = v
	}
	for _, mode := range []string{"dense", "oracle"} {
		pp, tg := median[mode+" pp"], median[mode+" tg"]
		require.Positive(t, pp, "%s prefill row in:\n%s", mode, out)
		require.Positive(t, tg, "%s decode row in:\n%s", mode, out)
		var got float64
		n, err := fmt.Sscanf(out[strings.Index(out, mode+" prefill / decode per token (medians): "):], mode+" prefill / decode per token (medians): %fx", &got)
		require.NoError(t, err, out)
		require.Equal(t, 1, n)
		require.InDelta(t, pp/tg, got, 0.01*pp/tg+0.005, "%s: %g / %g", mode, pp, tg)
	}
}

// bench with its default modes on the built-in model, which carries no
// predictor, measures dense alone and says why; flags that ask for nothing
// are refused.
func TestBenchDefaultsAndBadFlags(t *testing.T) {
	out, stderr, code := pinfer(t, "bench", "-p", "4", "-n", "2", "-r", "1")
	require.Zero(t, code, stderr)
	require.Contains(t, stderr, "carries no predictor (fc1/fc2), so only dense runs")
	require.Contains(t, out, "| dense | pp4 |")
	require.Contains(t, out, "| dense | tg2 |")
	require.NotContains(t, out, "sparse")
	for args, want := range map[string]string{
		"-r 0":               "bench: -r 0: want at least 1 repetition",
		"-r -2":              "bench: -r -2: want at least 1 repetition",
		"--mode dense,":      `bench: --mode "dense,": a mode is empty`,
		"--mode sparse":      "carries no predictor",
		"-n -1":              "bench: -n -1: want at least 0",
		"-d 0,-3":            "bench: -d -3: want at least 0",
		"-o xml":             `bench: -o "xml": want one of md, json, jsonl, csv`,
		"-p 4,,8":            `bench: -p "4,,8": an empty item between commas`,
		"-t 0":               "bench: -t 0: want at least 1",
		"-t 1,x":             `bench: -t "1,x": "x" is not an integer`,
		"--pg 64":            `bench: --pg "64": want two counts`,
		"--pg 64,0":          "bench: --pg 64,0: want a prompt and a decode of at least 1 token each",
		"--kv-type f32,":     `bench: --kv-type "f32,": an empty item between commas`,
		"--kv-type f16,q8_0": `bench: --kv-type "q8_0": want f32 or f16`,
	} {
		_, stderr, code := pinfer(t, append([]string{"bench", "-p", "4", "-n", "2"}, strings.Fields(args)...)...)
		require.NotZero(t, code, args)
		require.Contains(t, stderr, want, args)
		require.Equal(t, 1, strings.Count(strings.TrimSpace(stderr), "\n")+1, "one line: %q", stderr)
	}
}

// bench takes llama-bench's lists: every test at every thread count, one
// line each in every format. csv and jsonl carry the same records (the
// columns are jsonl's keys), and each closing ratio of the table is the
// ratio of the two medians it names.
func TestBenchLists(t *testing.T) {
	args := []string{"bench", "-p", "4,8", "-n", "2", "-t", "1,2", "-r", "1", "--mode", "dense,oracle"}
	out, stderr, code := pinfer(t, append(args, "-o", "csv")...)
	require.Zero(t, code, stderr)
	rows, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	require.NoError(t, err, out)
	require.Len(t, rows, 1+2*2*3, out)
	col := map[string]int{}
	for i, name := range rows[0] {
		col[name] = i
	}
	var got []string
	for _, r := range rows[1:] {
		got = append(got, r[col["mode"]]+" "+r[col["test"]]+" t"+r[col["n_threads"]]+" p"+r[col["n_prompt"]]+" g"+r[col["n_gen"]])
		v, err := strconv.ParseFloat(r[col["median_ts"]], 64)
		require.NoError(t, err)
		require.Positive(t, v)
		require.Len(t, strings.Fields(r[col["samples_ts"]]), 1)
		if b := r[col["bytes_per_token"]]; b != "" && b != "0" {
			require.NotContains(t, b, "e+", "numbers as a spreadsheet reads them")
		}
	}
	var want []string
	for _, mode := range []string{"dense", "oracle"} {
		for _, th := range []string{"1", "2"} {
			want = append(want, mode+" pp4 t"+th+" p4 g0", mode+" pp8 t"+th+" p8 g0", mode+" tg2 t"+th+" p0 g2")
		}
	}
	require.Equal(t, want, got)

	out, stderr, code = pinfer(t, append(args, "-o", "jsonl")...)
	require.Zero(t, code, stderr)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, len(want))
	for i, l := range lines {
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &rec), l)
		for k, v := range rec {
			require.Contains(t, col, k, "a csv column for each jsonl key")
			if s, ok := v.(string); ok && k != "model" { // each run has its own cache dir
				require.Equal(t, s, rows[1+i][col[k]], k)
			}
		}
		require.Contains(t, rec["model"], "shakespeare")
		require.Equal(t, want[i], fmt.Sprintf("%s %s t%v p%v g%v", rec["mode"], rec["test"], rec["n_threads"], rec["n_prompt"], rec["n_gen"]))
	}

	out, stderr, code = pinfer(t, append(args, "--progress")...)
	require.Zero(t, code, stderr)
	require.Contains(t, stderr, "(24/24)", "the bar counts each run, warm-ups too: 2 modes, 2 thread counts, 3 tests, 2 runs")
	require.NotContains(t, out, "24/24", "the bar is on stderr")
	median := tableMedians(t, out)
	require.Len(t, median, len(want), out)
	n := 0
	re := regexp.MustCompile(`^(\S+) prefill / decode per token \(medians, (\S+) against (\S+), (\d+) threads?\): ([0-9.]+)x$`)
	for _, line := range strings.Split(out, "\n") {
		m := re.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		n++
		got, err := strconv.ParseFloat(m[5], 64)
		require.NoError(t, err, line)
		want := median[m[1]+" "+m[2]+" "+m[4]] / median[m[1]+" "+m[3]+" "+m[4]]
		require.InDelta(t, want, got, 0.01*want+0.005, line)
	}
	require.Equal(t, 2*2*2, n, "a prefill / decode line for each mode, prefill test and thread count:\n%s", out)
}

// --kv-type takes a list too (llama-bench's -ctk): each test at each type,
// the line saying which, and the table's backend naming a type other than
// f32, as llama-bench names a non-default type_k.
func TestBenchKVTypes(t *testing.T) {
	args := []string{"bench", "-p", "0", "-n", "2", "-r", "1", "--kv-type", "f16,f32"}
	out, stderr, code := pinfer(t, append(args, "-o", "jsonl")...)
	require.Zero(t, code, stderr)
	var kvs []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var rec struct {
			KV   string `json:"kv_type"`
			Test string `json:"test"`
		}
		require.NoError(t, json.Unmarshal([]byte(l), &rec), l)
		kvs = append(kvs, rec.KV+" "+rec.Test)
	}
	require.Equal(t, []string{"f16 tg2", "f32 tg2"}, kvs)

	out, stderr, code = pinfer(t, args...)
	require.Zero(t, code, stderr)
	require.Equal(t, 1, strings.Count(out, "), KV f16 |"), out)
	require.Equal(t, 2, strings.Count(out, "| dense | tg2 |"), out)
}

// -m again measures another model, as llama-bench does: one table, the
// lines below it named by model, each file with its own default modes
// (sparse only where it carries a predictor); json is an array of the
// reports, and csv has every model's lines under one header.
func TestBenchModels(t *testing.T) {
	gen := filepath.Join(t.TempDir(), "q4.gguf")
	_, stderr, code := pinfer(t, "gen", "--n-embd", "128", "--n-ff", "256", "--n-layer", "2", "--n-head", "4", "--n-kv-head", "4",
		"--vocab", "512", "--rank", "32", "--type", "q4_0", "-o", gen)
	require.Zero(t, code, stderr)
	stories := fixtures.Path(t, "stories260K", "stories260K.gguf")
	args := []string{"bench", "-m", gen, "-m", stories, "-p", "4", "-n", "2", "-r", "1"}

	out, stderr, code := pinfer(t, append(args, "-o", "json")...)
	require.Zero(t, code, stderr)
	require.Contains(t, stderr, stories+" carries no predictor")
	var reps []struct {
		Model   string `json:"model"`
		Results []struct {
			Mode string `json:"mode"`
			Test string `json:"test"`
		} `json:"results"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &reps), out)
	require.Len(t, reps, 2)
	var got []string
	for _, r := range reps {
		for _, x := range r.Results {
			got = append(got, filepath.Base(r.Model)+" "+x.Mode+" "+x.Test)
		}
	}
	require.Equal(t, []string{"q4.gguf dense pp4", "q4.gguf dense tg2", "q4.gguf sparse pp4", "q4.gguf sparse tg2",
		"stories260K.gguf dense pp4", "stories260K.gguf dense tg2"}, got)

	out, stderr, code = pinfer(t, args...)
	require.Zero(t, code, stderr)
	require.Equal(t, 1, strings.Count(out, "| model |"), out)
	require.Equal(t, 4, strings.Count(out, "\n| q4.gguf |"), out)
	require.Equal(t, 2, strings.Count(out, "\n| stories260K.gguf |"), out)
	require.Regexp(t, `(?m)^q4\.gguf: sparse / dense decode \(medians\): [0-9.]+x$`, out)
	require.Regexp(t, `(?m)^stories260K\.gguf: dense prefill / decode per token \(medians\): [0-9.]+x$`, out)

	out, stderr, code = pinfer(t, append(args, "-o", "csv")...)
	require.Zero(t, code, stderr)
	rows, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	require.NoError(t, err, out)
	require.Len(t, rows, 1+len(got))
}

// On a CPU where it pays, a q4_0 file's whole-read matrices are repacked at
// load, which bench reports; --no-repack keeps the file's layout.
func TestBenchRepack(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q4.gguf")
	_, stderr, code := pinfer(t, "gen", "--n-embd", "128", "--n-ff", "256", "--n-layer", "2", "--n-head", "4", "--n-kv-head", "4",
		"--vocab", "512", "--rank", "32", "--type", "q4_0", "-o", path)
	require.Zero(t, code, stderr)
	repacked := func(args ...string) int64 {
		out, stderr, code := pinfer(t, append([]string{"bench", "-m", path, "-p", "4", "-n", "2", "-r", "1", "-o", "json"}, args...)...)
		require.Zero(t, code, stderr)
		var rep struct {
			Repacked *int64 `json:"repacked_bytes"`
		}
		require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
		require.NotNil(t, rep.Repacked, out)
		return *rep.Repacked
	}
	// Attention's q, k, v, o of two layers (128 rows of 128 columns), their
	// predictors' fc1 (32 rows of 128) and fc2 (256 rows of 32), and the
	// output (512 rows): 18 bytes a block of 32; a dense run also the FFN's
	// gate and up (256 rows each), and down's copy for the axpy, whose
	// records of 16 rows span 256 columns (the 128 padded).
	load, ffn := int64(0), int64(0)
	if avx2.PackPays() {
		load, ffn = int64(2*4*128*4*18+2*(32*4*18+256*1*18)+512*4*18), int64(2*(2*256*4*18+256/16*2304))
	}
	require.Equal(t, load, repacked("--mode", "sparse"))
	require.Equal(t, load+ffn, repacked("--mode", "dense"))
	require.Equal(t, load+ffn, repacked("--mode", "dense,sparse"))
	require.Zero(t, repacked("--mode", "dense", "--no-repack"))
}

// gen's key/value heads follow --n-head unless given; run refuses a
// negative count other than -n -1 or -2 (llama.cpp's), a negative context
// and sampling settings without a meaning, naming the flag; serve refuses
// the same lengths and slots or a grace period below their ranges.
func TestGenAndRunFlags(t *testing.T) {
	path := filepath.Join(t.TempDir(), "g.gguf")
	_, stderr, code := pinfer(t, "gen", "--n-embd", "128", "--n-ff", "256", "--n-layer", "1", "--n-head", "4", "--vocab", "512", "-o", path)
	require.Zero(t, code, stderr)
	out, stderr, code := pinfer(t, "run", "-m", path, "--prompt-ids", "1,2,3", "-n", "2", "--temp", "0")
	require.Zero(t, code, stderr)
	require.NotEmpty(t, out)
	_, stderr, code = pinfer(t, "run", "-m", path, "--prompt-ids", "1,2,3", "-n", "-2", "-c", "8", "--temp", "0")
	require.Zero(t, code, stderr)
	for args, want := range map[string]string{
		"-n -5":              "-n -5: want a count, or -1 (or -2)",
		"-c -4":              "-c -4: want a context size, or 0",
		"--top-p 2":          "--top-p 2: want a probability in (0, 1]",
		"--min-p -0.1":       "--min-p -0.1: want a probability in [0, 1]",
		"--temp -1":          "--temp -1: want 0 (greedy) or more",
		"--repeat-penalty 0": "--repeat-penalty 0: want a positive factor",
		"--repeat-last-n -4": "--repeat-last-n -4: want a count of tokens, 0 for none or -1 for all",
		"--top-k -3":         "--top-k -3: want 0 (off) or more",
		"--top-logits -1":    "--top-logits -1: want a count",
		"--prompt-ids 1,,2":  `--prompt-ids "1,,2": an empty item between commas`,
	} {
		_, stderr, code := pinfer(t, append([]string{"run", "-p", "hi"}, strings.Fields(args)...)...)
		require.NotZero(t, code, args)
		require.Contains(t, stderr, want, args)
	}
	// serve refuses them before it loads the model or listens.
	for args, want := range map[string]string{
		"-c -3":                  "-c -3: want a context size, or 0",
		"-n -5":                  "-n -5: want a count",
		"-n 0":                   "-n 0: want a count of at least 1",
		"--parallel 0":           "--parallel 0: want at least 1 slot",
		"--shutdown-timeout -1s": "--shutdown-timeout -1s: want 0 or more",
		"--lookup -1":            "--lookup -1: want a count of tokens to draft",
		"--lookup 3 -md x.gguf":  "--lookup and --model-draft each draft the tokens",
	} {
		_, stderr, code := pinfer(t, append([]string{"serve", "--port", "0"}, strings.Fields(args)...)...)
		require.NotZero(t, code, args)
		require.Contains(t, stderr, want, args)
	}
}

// --op-times adds a table of each line's ops below the ratios, its shares
// adding up to the whole line; json carries it as op_times, and csv, whose
// records are flat, leaves it out.
func TestBenchOpTimes(t *testing.T) {
	out, stderr, code := pinfer(t, "bench", "-p", "4", "-n", "2", "-r", "1", "--op-times")
	require.Zero(t, code, stderr)
	at := strings.Index(out, "| model | mode | test | threads | op |")
	require.Positive(t, at, out)
	share := map[string]float64{} // test -> sum of its ops' shares
	ops := map[string][]string{}
	for _, line := range strings.Split(out[at:], "\n")[2:] {
		f := strings.Split(line, "|")
		if len(f) < 11 {
			continue
		}
		test := strings.TrimSpace(f[3])
		v, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(f[8]), "%"), 64)
		require.NoError(t, err, line)
		share[test] += v
		ops[test] = append(ops[test], strings.TrimSpace(f[5]))
	}
	for _, test := range []string{"pp4", "tg2"} {
		require.InDelta(t, 100, share[test], 0.5, "%s in:\n%s", test, out)
		require.Subset(t, ops[test], []string{"embedding", "matmul", "attention", "sparse_ffn", "output"}, test)
	}
	js, stderr, code := pinfer(t, "bench", "-p", "0", "-n", "2", "-r", "1", "--op-times", "-o", "json")
	require.Zero(t, code, stderr)
	var rep struct {
		Results []struct {
			Ops []map[string]any `json:"op_times"`
		} `json:"results"`
	}
	require.NoError(t, json.Unmarshal([]byte(js), &rep))
	require.Len(t, rep.Results, 1)
	require.NotEmpty(t, rep.Results[0].Ops)
	csvOut, stderr, code := pinfer(t, "bench", "-p", "0", "-n", "2", "-r", "1", "--op-times", "-o", "csv")
	require.Zero(t, code, stderr)
	require.NotContains(t, csvOut, "op_times")
}
