package bench

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pinfer/pinfer/engine"
	"github.com/pinfer/pinfer/models"
)

// Run refuses, before measuring anything, a test whose KV cache could not
// fit in memory: at that depth Go died allocating it, after the tests
// before it had run.
func TestRunRefusesContextPastMemory(t *testing.T) {
	path, err := models.DefaultModelPath()
	require.NoError(t, err)
	m, err := engine.Load(path, "")
	require.NoError(t, err)
	defer m.Close()
	o := Options{Gens: []int{1}, Reps: 1, Threads: []int{1}, Modes: []string{"dense"}}
	o.Depths = []int{0, 1e11}
	_, err = Run(m, o)
	require.ErrorContains(t, err, "bench: -d 100000000000: a context of 100000000003 positions needs")
	o.Depths, o.Prompts = nil, []int{1e11}
	_, err = Run(m, o)
	require.ErrorContains(t, err, "bench: pp100000000000: a context of")
}
