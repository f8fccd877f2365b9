package graph

import (
	"testing"

	"github.com/pinfer/pinfer/ops"
	"github.com/stretchr/testify/require"
)

// Sequences run together in one batch get the logits they get alone, in
// prefill and in decode, whatever their lengths and positions.
func TestBatchMatchesSingle(t *testing.T) {
	p, err := build(t, llamaTOML(t))
	require.NoError(t, err)
	prompts := [][]int{{1, 403, 407}, {1}, {1, 385, 410, 317, 12}}
	next := []int{13, 300, 99}

	var alone [][]float32
	for k, pr := range prompts {
		s := p.NewSession(64, nil)
		_, err := s.Forward(pr, false)
		require.NoError(t, err)
		out, err := s.Forward([]int{next[k]}, false)
		require.NoError(t, err)
		alone = append(alone, append([]float32(nil), out.Data...))
	}

	pool := ops.NewPool(2)
	defer pool.Close()
	r := p.NewRunner(pool)
	var seqs []*Session
	for range prompts {
		seqs = append(seqs, p.NewSession(64, nil))
	}
	out, err := r.Forward(seqs, prompts, false)
	require.NoError(t, err)
	require.Equal(t, 3, out.Rows)
	out, err = r.Forward(seqs, [][]int{{next[0]}, {next[1]}, {next[2]}}, false)
	require.NoError(t, err)
	for k := range prompts {
		require.InDeltaSlice(t, alone[k], out.Row(k), 1e-5, "sequence %d", k)
		require.Equal(t, len(prompts[k])+1, seqs[k].Pos())
	}
}
