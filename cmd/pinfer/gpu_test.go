//go:build !cuda

package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A build without CUDA says so when asked for the GPU, and runs on the CPU
// with a budget of 0.
func TestNoCUDABuild(t *testing.T) {
	_, stderr, code := pinfer(t, "run", "-n", "2", "--vram-budget", "1")
	require.NotEqual(t, 0, code)
	require.Contains(t, stderr, "this pinfer was built without CUDA; see README 'Building for a GPU'")

	_, stderr, code = pinfer(t, "bench", "--mode", "split", "-p", "0", "-n", "2", "-r", "1")
	require.NotEqual(t, 0, code)
	require.Contains(t, stderr, "mode split needs a GPU")

	_, stderr, code = pinfer(t, "run", "-n", "2", "--vram-budget", "-1")
	require.NotEqual(t, 0, code)
	require.Contains(t, stderr, "--vram-budget -1")

	out, _, code := pinfer(t, "run", "--prompt-ids", "1", "-n", "4", "--temp", "0", "--json", "--vram-budget", "0")
	require.Equal(t, 0, code)
	require.Contains(t, out, `"tokens"`)
}
