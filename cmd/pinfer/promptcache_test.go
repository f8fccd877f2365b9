package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/pinfer/pinfer/internal/fixtures"
	"github.com/stretchr/testify/require"
)

// promptCacheRun is run --json's fields that these tests read.
type promptCacheRun struct {
	PromptTokens []int          `json:"prompt_tokens"`
	Tokens       []int          `json:"tokens"`
	Timings      map[string]any `json:"timings"`
	PromptCache  struct {
		File   string `json:"file"`
		Loaded int    `json:"loaded"`
		Reused int    `json:"reused"`
		Saved  int    `json:"saved"`
		Bytes  int64  `json:"bytes_written"`
	} `json:"prompt_cache"`
}

func runJSON(t *testing.T, args ...string) promptCacheRun {
	t.Helper()
	out, stderr, code := pinfer(t, append(args, "--json")...)
	require.Zero(t, code, stderr)
	var r promptCacheRun
	require.NoError(t, json.Unmarshal([]byte(out), &r), out)
	return r
}

func ids(toks []int) string {
	s := make([]string, len(toks))
	for i, t := range toks {
		s[i] = strconv.Itoa(t)
	}
	return strings.Join(s, ",")
}

// llama.cpp's 200 greedy tokens of stories260K, split across processes by
// the prompt cache: the first 100 are saved with --prompt-cache-all, and a
// fresh process with no prompt takes the saved tokens as its prompt (as
// llama-cli does), runs only the last of them, and goes on to the
// reference text. Then --prompt-cache alone: a prompt of the first 50
// tokens is saved once it has run, and a longer prompt reuses them.
func TestPromptCacheAcrossProcesses(t *testing.T) {
	stories := fixtures.Path(t, "stories260K", "stories260K.gguf")
	want, err := os.ReadFile(fixtures.Path(t, "stories260K", "expected_t0_n200.txt"))
	require.NoError(t, err)
	dir := t.TempDir()
	all := filepath.Join(dir, "all.bin")
	base := []string{"run", "-m", stories, "--temp", "0", "-c", "512", "-t", "2"}

	first := runJSON(t, append(base, "-n", "100", "--prompt-cache", all, "--prompt-cache-all")...)
	require.Equal(t, []int{1}, first.PromptTokens)
	require.Len(t, first.Tokens, 100)
	require.Equal(t, 0, first.PromptCache.Loaded)
	require.Equal(t, 100, first.PromptCache.Saved, "BOS and the 99 tokens that ran (the last one never does)")
	st, err := os.Stat(all)
	require.NoError(t, err)
	require.Equal(t, st.Size(), first.PromptCache.Bytes)

	out, stderr, code := pinfer(t, append(base, "-n", "101", "--prompt-cache", all)...)
	require.Zero(t, code, stderr)
	require.Equal(t, string(want), out)
	require.Contains(t, stderr, "prompt cache = 99 of 100 prompt tokens from "+all)

	// The same, as JSON: the prompt is the saved tokens, all but the last
	// from the cache; the file stays as it was (it held that prompt).
	again := runJSON(t, append(base, "-n", "101", "--prompt-cache", all)...)
	require.Equal(t, append([]int{1}, first.Tokens[:99]...), again.PromptTokens)
	require.Equal(t, float64(99), again.Timings["cache_n"])
	require.Equal(t, float64(1), again.Timings["prompt_n"])
	require.Equal(t, 100, again.PromptCache.Loaded)
	require.Equal(t, 99, again.PromptCache.Reused)
	require.Zero(t, again.PromptCache.Saved)
	require.Equal(t, first.Tokens[99], again.Tokens[0])
	toks := append(append([]int{}, first.Tokens...), again.Tokens[1:]...)
	require.Len(t, toks, 200)

	// Saved once the prompt has run: 51 positions.
	half := filepath.Join(dir, "half.bin")
	r := runJSON(t, append(base, "--prompt-ids", ids(append([]int{1}, toks[:50]...)), "-n", "4", "--prompt-cache", half)...)
	require.Equal(t, 51, r.PromptCache.Saved)
	require.Equal(t, toks[50:54], r.Tokens)
	r = runJSON(t, append(base, "--prompt-ids", ids(append([]int{1}, toks[:80]...)), "-n", "120", "--prompt-cache", half)...)
	require.Equal(t, 51, r.PromptCache.Reused)
	require.Equal(t, float64(51), r.Timings["cache_n"])
	require.Equal(t, float64(30), r.Timings["prompt_n"])
	require.Equal(t, toks[80:], r.Tokens)
	require.Equal(t, 81, r.PromptCache.Saved, "the longer prompt is saved in its place")

	// With --prompt-cache-ro the file is read, never written, nor made.
	before, err := os.ReadFile(half)
	require.NoError(t, err)
	r = runJSON(t, append(base, "--prompt-ids", ids(append([]int{1}, toks[:90]...)), "-n", "3", "--prompt-cache", half, "--prompt-cache-ro")...)
	require.Equal(t, 81, r.PromptCache.Reused)
	require.Equal(t, toks[90:93], r.Tokens)
	after, err := os.ReadFile(half)
	require.NoError(t, err)
	require.Equal(t, before, after)
	none := filepath.Join(dir, "none.bin")
	runJSON(t, append(base, "-n", "3", "--prompt-cache", none, "--prompt-cache-ro")...)
	require.NoFileExists(t, none)
}

// A file that this run cannot use is refused with one line naming the file
// and what differs, and left as it was: another model, a context too
// small for its tokens, another KV cache type, a truncated file, a file of
// something else.
func TestPromptCacheRefused(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "romeo.bin")
	_, stderr, code := pinfer(t, "run", "-p", "ROMEO: what light", "-n", "2", "--temp", "0", "--prompt-cache", file)
	require.Zero(t, code, stderr)
	saved, err := os.ReadFile(file)
	require.NoError(t, err)

	stories := fixtures.Path(t, "stories260K", "stories260K.gguf")
	run := []string{"run", "-p", "ROMEO", "-n", "2", "--prompt-cache"}
	refused(t, []string{"run", "-m", stories, "-p", "Once", "-n", "2", "--prompt-cache", file}, file, "model mismatch")
	refused(t, append(run, file, "-c", "4"), file, "context mismatch", "context of 4")
	refused(t, append(run, file, "--kv-type", "f16"), file, "kv type mismatch", "f32", "f16")
	short := filepath.Join(dir, "short.bin")
	require.NoError(t, os.WriteFile(short, saved[:len(saved)/2], 0o644))
	refused(t, append(run, short), short, "truncated")
	junk := filepath.Join(dir, "junk.bin")
	require.NoError(t, os.WriteFile(junk, []byte(strings.Repeat("not a state ", 40)), 0o644))
	refused(t, append(run, junk), junk, "not a pinfer state file")
	after, err := os.ReadFile(file)
	require.NoError(t, err)
	require.Equal(t, saved, after)

	refused(t, []string{"run", "-p", "ROMEO", "--prompt-cache-all"}, "--prompt-cache-all", "--prompt-cache FILE")
	refused(t, []string{"run", "-cnv", "--prompt-cache", file}, "--prompt-cache", "conversation")
}
