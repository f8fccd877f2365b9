package main

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/pinfer/pinfer/internal/fixtures"
	"github.com/stretchr/testify/require"
)

// Errors that run finds before generating: one line each on stderr, no
// stack, and no prompt echoed in front of them.
func TestRunRefusesBeforePrinting(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-c", "100000000000"}, "GB of KV cache"}, // would die allocating it
		{[]string{"-c", "4", "-p", "ROMEO: hello there friend"}, "the prompt has"},
		{[]string{"--seed", "-5"}, "--seed -5"},
		{[]string{"--top-logits", "3"}, "add --json"}, // was ignored
		{[]string{"-p", "ROMEO:", "--prompt-ids", "1,2"}, "use one of them"},
		{[]string{"-m", t.TempDir()}, "is a directory, not a GGUF file (pinfer convert"}, // was "mmap: no such device"
	} {
		args := append([]string{"run", "-n", "2"}, c.args...)
		if !strings.Contains(strings.Join(c.args, " "), "-p") {
			args = append(args, "-p", "ROMEO:")
		}
		refused(t, args, c.want)
	}
}

// The seed run used is in its output, and running with it draws the same
// text again; -1 asks for a new one each run.
func TestRunSeedReported(t *testing.T) {
	type result struct {
		Seed   uint64 `json:"seed"`
		Tokens []int  `json:"tokens"`
	}
	run := func(seed string) result {
		out, stderr, code := pinfer(t, "run", "-p", "ROMEO:", "-n", "24", "--temp", "1.5", "--seed", seed, "--json")
		require.Zero(t, code, stderr)
		var r result
		require.NoError(t, json.Unmarshal([]byte(out), &r))
		return r
	}
	a, b := run("-1"), run("-1")
	require.NotEqual(t, a.Seed, b.Seed)
	again := run(strconv.FormatUint(a.Seed, 10))
	require.Equal(t, a.Seed, again.Seed)
	require.Equal(t, a.Tokens, again.Tokens)
	require.Equal(t, uint64(11), run("11").Seed)
}

// The model's size as llama-bench writes it, in MiB and millions below a
// GiB and a billion: a small model showed "0.00 GiB | 0.00 B".
func TestBenchSizeUnits(t *testing.T) {
	require.Equal(t, "1.00 MiB", sizeText(1<<20))
	require.Equal(t, "3.60 GiB", sizeText(3865470566))
	require.Equal(t, "0.26 M", paramsText(260000))
	require.Equal(t, "6.86 B", paramsText(6860000000))
}

// tokenize reads only the vocabulary, so llama.cpp's vocab-only files
// work, and shows each piece with its leading space as llama.cpp does.
func TestTokenizeVocabOnly(t *testing.T) {
	vocab := fixtures.Path(t, "vocab-llama-spm", "ggml-vocab-llama-spm.gguf")
	out, stderr, code := pinfer(t, "tokenize", "-m", vocab, "-p", "Hello world")
	require.Zero(t, code, stderr)
	require.Equal(t, "     1 -> \"<s>\"\n 15043 -> \" Hello\"\n  3186 -> \" world\"\n", out)
}
