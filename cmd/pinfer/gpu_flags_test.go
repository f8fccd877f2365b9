package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The index flags mean something only with a budget: without one a CUDA
// build placed nothing and ignored them.
func TestIndexFlagsNeedBudget(t *testing.T) {
	require.NoError(t, (&gpuFlags{}).indexNeedsBudget())
	require.NoError(t, (&gpuFlags{budget: 2, resetIndex: true, disableIndex: true}).indexNeedsBudget())
	require.ErrorContains(t, (&gpuFlags{resetIndex: true}).indexNeedsBudget(), "--reset-gpu-index: there is no GPU index without --vram-budget")
	require.ErrorContains(t, (&gpuFlags{disableIndex: true}).indexNeedsBudget(), "--disable-gpu-index: there is no GPU index without --vram-budget")
}
