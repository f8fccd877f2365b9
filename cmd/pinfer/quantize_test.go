package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pinfer/pinfer/internal/fixtures"
	"github.com/stretchr/testify/require"
)

// quantize as llama-quantize is called: IN OUT TYPE [NTHREADS], TYPE a name
// in any case or llama.cpp's id. It prints each tensor's name, shape, types
// and sizes and the model's size before and after, draws its progress on
// stderr, and the file it writes runs.
func TestQuantizeCLI(t *testing.T) {
	dir := t.TempDir()
	f16 := filepath.Join(dir, "f16.gguf")
	_, stderr, code := pinfer(t, "convert", fixtures.Path(t, "shakespeare-relu-6m"), "-o", f16, "--type", "f16")
	require.Zero(t, code, stderr)

	q4 := filepath.Join(dir, "q4.gguf")
	out, stderr, code := pinfer(t, "quantize", f16, q4, "Q4_0", "2")
	require.Zero(t, code, stderr)
	require.Contains(t, stderr, "writing q4.gguf")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 57+3, out)
	require.Regexp(t, `^\[   1/  57\] token_embd\.weight +\[256, 1024\] +f16 -> q4_0 +0\.500 MiB -> +0\.141 MiB$`, lines[0])
	require.Regexp(t, `^\[   2/  57\] blk\.0\.attn_norm\.weight +\[256\] +f32 -> f32 `, lines[1])
	require.Regexp(t, `^quantize: model size = +12\.26 MiB`, lines[57])
	require.Regexp(t, `^quantize: quant size = +3\.46 MiB \(.*q4\.gguf, q4_0\)$`, lines[58])
	want, err := os.ReadFile(q4)
	require.NoError(t, err)

	// llama.cpp's id for q4_0 and the lower-case name write the same file;
	// --pure changes nothing (pinfer has no mixtures to turn off).
	for _, args := range [][]string{{"2"}, {"q4_0", "1"}, {"--pure", "q4_0"}} {
		again := filepath.Join(dir, "again.gguf")
		_, stderr, code := pinfer(t, append([]string{"quantize", f16, again}, args...)...)
		require.Zero(t, code, "%v: %s", args, stderr)
		got, err := os.ReadFile(again)
		require.NoError(t, err)
		require.Equal(t, want, got, "%v", args)
	}

	out, stderr, code = pinfer(t, "quantize", "--leave-output-tensor", f16, filepath.Join(dir, "lo.gguf"), "q8_0")
	require.Zero(t, code, stderr)
	require.Regexp(t, `(?m)^\[  57/  57\] output\.weight +\[256, 1024\] +f16 -> f16 `, out)
	require.Regexp(t, `(?m)^\[   1/  57\] token_embd\.weight +\[256, 1024\] +f16 -> q8_0 `, out)

	out, stderr, code = pinfer(t, "run", "-m", q4, "-p", "ROMEO:", "-n", "4", "--temp", "0")
	require.Zero(t, code, stderr)
	require.NotEmpty(t, strings.TrimSpace(out))
}

// Refusals: one line on stderr naming what is wrong, a non-zero exit, no
// output file, and an existing output left as it was.
func TestQuantizeRefuses(t *testing.T) {
	dir := t.TempDir()
	f16 := filepath.Join(dir, "f16.gguf")
	_, stderr, code := pinfer(t, "convert", fixtures.Path(t, "shakespeare-relu-6m"), "-o", f16, "--type", "f16")
	require.Zero(t, code, stderr)
	q8 := filepath.Join(dir, "q8.gguf")
	_, stderr, code = pinfer(t, "quantize", f16, q8, "q8_0")
	require.Zero(t, code, stderr)
	out := filepath.Join(dir, "out.gguf")
	require.NoError(t, os.WriteFile(out, []byte("keep me"), 0o644))
	cut := filepath.Join(dir, "cut.gguf")
	b, err := os.ReadFile(f16)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(cut, b[:len(b)/3], 0o644))

	refused(t, []string{"quantize", f16, out, "q4_K_M"}, `type "q4_K_M" is not supported`, "f32 (0), f16 (1), bf16 (32), q8_0 (7) or q4_0 (2)")
	refused(t, []string{"quantize", f16, out, "3"}, `type "3" is not supported`)
	refused(t, []string{"quantize", filepath.Join(dir, "nope.gguf"), out, "q4_0"}, "nope.gguf", "no such file")
	refused(t, []string{"quantize", cut, out, "q4_0"}, "cut.gguf", "tensor", "past the end of the file")
	refused(t, []string{"quantize", q8, out, "q4_0"}, "q8.gguf", `tensor "token_embd.weight"`, "--allow-requantize")
	refused(t, []string{"quantize", f16, f16, "q4_0"}, "f16.gguf", "is the input")
	refused(t, []string{"quantize", f16, out}, "want IN.gguf OUT.gguf TYPE [NTHREADS]")
	refused(t, []string{"quantize", f16, out, "q4_0", "lots"}, `NTHREADS "lots"`)
	got, err := os.ReadFile(out)
	require.NoError(t, err)
	require.Equal(t, "keep me", string(got))
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 4, "f16, q8, out and cut, nothing more")
	after, err := os.ReadFile(f16)
	require.NoError(t, err)
	require.Equal(t, b, after)

	_, stderr, code = pinfer(t, "quantize", "--allow-requantize", q8, out, "q4_0")
	require.Zero(t, code, stderr)
}
