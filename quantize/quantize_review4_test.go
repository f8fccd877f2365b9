package quantize_test

import (
	"path/filepath"
	"testing"

	"github.com/pinfer/pinfer/ops"
	"github.com/pinfer/pinfer/quantize"
	"github.com/stretchr/testify/require"
)

// A thread count far past any machine's (llama-quantize's NTHREADS is
// the user's) quantizes as the CPUs would, without a panic or an
// allocation per thread asked for.
func TestHugeThreadCount(t *testing.T) {
	f16 := shakespeare(t, ops.F16)
	dir := t.TempDir()
	want := filepath.Join(dir, "want.gguf")
	_, err := quantize.File(f16, want, quantize.Options{Type: ops.Q4_0, Threads: 2})
	require.NoError(t, err)
	got := filepath.Join(dir, "got.gguf")
	_, err = quantize.File(f16, got, quantize.Options{Type: ops.Q4_0, Threads: 1 << 40})
	require.NoError(t, err)
	require.Equal(t, readFile(t, want), readFile(t, got))
}
