package quantize_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pinfer/pinfer/ops"
	"github.com/pinfer/pinfer/quantize"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return b
}

// entries lists a directory's names, to see that a failure left no file.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// failsCleanly runs a quantization that must fail with an error holding
// each of want, on one line, and leave the output's directory as it was.
func failsCleanly(t *testing.T, in, out string, opt quantize.Options, want ...string) {
	t.Helper()
	dir := filepath.Dir(out)
	before := entries(t, dir)
	var outBefore []byte
	if st, err := os.Stat(out); err == nil && st.Mode().IsRegular() {
		outBefore = readFile(t, out)
	}
	_, err := quantize.File(in, out, opt)
	require.Error(t, err)
	require.NotContains(t, err.Error(), "\n")
	for _, w := range want {
		require.Contains(t, err.Error(), w)
	}
	require.Equal(t, before, entries(t, dir), "no file left behind")
	if outBefore != nil {
		require.Equal(t, outBefore, readFile(t, out), "the existing output is untouched")
	}
}

// A quantized tensor is quantized again only with AllowRequantize
// (llama-quantize's --allow-requantize), and then lands within q4_0's error
// of the q8_0 values; a tensor already of the type asked for is copied, flag
// or not.
func TestRequantize(t *testing.T) {
	dir := t.TempDir()
	q8 := shakespeare(t, ops.Q8_0)
	out := filepath.Join(dir, "q4.gguf")
	failsCleanly(t, q8, out, quantize.Options{Type: ops.Q4_0}, q8, `tensor "token_embd.weight"`, "q8_0 already", "--allow-requantize")
	failsCleanly(t, q8, out, quantize.Options{Type: ops.F16}, q8, `tensor "token_embd.weight"`, "--allow-requantize")

	plan, err := quantize.File(q8, out, quantize.Options{Type: ops.Q4_0, AllowRequantize: true})
	require.NoError(t, err)
	src, got := open(t, q8), open(t, out)
	for i, p := range plan {
		s, q := &src.Tensors[i], &got.Tensors[i]
		if len(s.Dims) == 1 {
			assert.True(t, p.Copied(), s.Name)
			continue
		}
		require.Equal(t, ops.Q4_0, q.Type, s.Name)
		within(t, s.Name, dequant(t, got, q), dequant(t, src, s))
	}

	same := filepath.Join(dir, "q8.gguf")
	plan, err = quantize.File(q8, same, quantize.Options{Type: ops.Q8_0})
	require.NoError(t, err)
	for _, p := range plan {
		assert.True(t, p.Copied(), p.Name)
	}
	sameFile(t, src, open(t, same))
}

// --leave-output-tensor keeps output.weight's type and bytes; the rest is
// quantized as without it.
func TestLeaveOutput(t *testing.T) {
	f16 := shakespeare(t, ops.F16)
	out := filepath.Join(t.TempDir(), "q4.gguf")
	_, err := quantize.File(f16, out, quantize.Options{Type: ops.Q4_0, LeaveOutput: true})
	require.NoError(t, err)
	src, got, ref := open(t, f16), open(t, out), open(t, shakespeare(t, ops.Q4_0))
	for i := range got.Tensors {
		q, r := &got.Tensors[i], &ref.Tensors[i]
		if q.Name == "output.weight" {
			s, _ := src.Tensor("output.weight")
			assert.Equal(t, ops.F16, q.Type)
			assert.Equal(t, src.Data(s), got.Data(q))
			continue
		}
		assert.Equal(t, r.Type, q.Type, q.Name)
		assert.Equal(t, ref.Data(r), got.Data(q), q.Name)
	}
}

// Bad input: a missing file, a truncated one, output over the input, into a
// directory, an unsupported type. Each is one line naming the file (and the
// tensor where one is at fault), and no file is written or changed.
func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	f16 := shakespeare(t, ops.F16)
	out := filepath.Join(dir, "out.gguf")

	missing := filepath.Join(dir, "nope.gguf")
	failsCleanly(t, missing, out, quantize.Options{Type: ops.Q8_0}, missing, "no such file")

	full := readFile(t, f16)
	cut := filepath.Join(t.TempDir(), "cut.gguf")
	require.NoError(t, os.WriteFile(cut, full[:len(full)/2], 0o644))
	failsCleanly(t, cut, out, quantize.Options{Type: ops.Q8_0}, cut, "tensor", "past the end of the file")
	head := filepath.Join(t.TempDir(), "head.gguf")
	require.NoError(t, os.WriteFile(head, full[:1000], 0o644))
	failsCleanly(t, head, out, quantize.Options{Type: ops.Q8_0}, head, `metadata key "tokenizer.ggml.tokens"`)

	// An existing output stays as it was when the run fails.
	require.NoError(t, os.WriteFile(out, []byte("keep me"), 0o644))
	failsCleanly(t, cut, out, quantize.Options{Type: ops.Q8_0}, cut)
	failsCleanly(t, shakespeare(t, ops.Q8_0), out, quantize.Options{Type: ops.Q4_0}, "--allow-requantize")

	// The output may not be the input, by its name or through a link.
	in := filepath.Join(t.TempDir(), "in.gguf")
	require.NoError(t, os.WriteFile(in, full, 0o644))
	failsCleanly(t, in, in, quantize.Options{Type: ops.Q8_0}, in, "is the input")
	link := filepath.Join(filepath.Dir(in), "link.gguf")
	require.NoError(t, os.Link(in, link))
	failsCleanly(t, in, link, quantize.Options{Type: ops.Q8_0}, "is the input")
	require.Equal(t, full, readFile(t, in))

	failsCleanly(t, f16, dir, quantize.Options{Type: ops.Q8_0}, dir, "directory")
	failsCleanly(t, f16, out, quantize.Options{Type: ops.Q4_1}, "q4_1", "not supported")
	require.Equal(t, "keep me", string(readFile(t, out)))
	require.False(t, strings.Contains(strings.Join(entries(t, dir), " "), ".tmp"))
}
