package graph

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pinfer/pinfer/ops"
)

// OpTimes counts the calls that llama.toml's nodes make over stories260K's
// five blocks, a layer's q, k and v (and gate and up) one call each, and
// gives each op a share of the Forward's time.
func TestOpTimes(t *testing.T) {
	p, err := build(t, llamaTOML(t))
	require.NoError(t, err)
	pool := ops.NewPool(2)
	defer pool.Close()
	s := p.NewSession(64, pool)
	_, err = s.Forward([]int{1, 2, 3}, false)
	require.NoError(t, err)
	ot := &OpTimes{}
	s.Runner().OpTimes = ot
	const steps = 3
	for i := range steps {
		_, err = s.Forward([]int{5 + i}, false)
		require.NoError(t, err)
	}
	perBlock := map[string]int{"rms_norm": 2, "matmul": 4, "rope": 2, "attention": 1, "add": 2, "silu": 1, "mul": 1}
	want := map[string]int{"embedding": 1, "rms_norm": 1, "output": 1}
	for op, n := range perBlock {
		want[op] += 5 * n
	}
	got := map[string]int{}
	var order []string
	for _, o := range ot.Ops {
		got[o.Op] = o.Calls / steps
		assert.Equal(t, 0, o.Calls%steps, o.Op)
		assert.Positive(t, o.Time, o.Op)
		order = append(order, o.Op)
	}
	assert.Equal(t, want, got)
	assert.Equal(t, "embedding", order[0], "ops in the order first run")
	assert.Equal(t, "output", order[len(order)-1])

	s.Runner().OpTimes = nil
	_, err = s.Forward([]int{9}, false)
	require.NoError(t, err)
	for _, o := range ot.Ops {
		assert.Equal(t, steps*want[o.Op], o.Calls, "%s: no more calls counted once OpTimes is unset", o.Op)
	}
}
