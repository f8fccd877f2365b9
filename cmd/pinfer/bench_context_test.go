package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// bench refuses a depth whose KV cache cannot fit, in one line naming -d
// (it died in Go's allocator: "fatal error: out of memory"), and a
// --predictor, which it took and ignored: its modes name the predictors.
func TestBenchRefusesDepthAndPredictor(t *testing.T) {
	refused(t, []string{"bench", "--mode", "dense", "-r", "1", "-p", "0", "-n", "1", "-d", "0,100000000000"}, "-d 100000000000", "GB of KV cache")
	refused(t, []string{"bench", "--mode", "dense", "-r", "1", "-p", "100000000000", "-n", "0"}, "pp100000000000", "GB of KV cache")
	refused(t, []string{"bench", "--predictor", "oracle", "-r", "1"}, "--predictor", "--mode dense,oracle")
	out, stderr, code := pinfer(t, "bench", "--help")
	require.Zero(t, code, stderr)
	require.NotContains(t, out, "--predictor")
}
