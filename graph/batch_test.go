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

// A layer's q, k and v read the same input one after another, and so do
// its FFN's gate and up (llama.toml's FFN is dense): the plan runs each
// such run as one call, each into a buffer of its own, none the input's; and
// the logits are what one call per node gives (grouping off), within the
// float rounding of rows cut into pieces at other places.
func TestPlanGroupsSiblings(t *testing.T) {
	p, err := build(t, llamaTOML(t))
	require.NoError(t, err)
	pool := ops.NewPool(2)
	defer pool.Close()
	r := p.NewRunner(pool)
	for _, rows := range []int{1, 7} {
		pl := r.planFor(rows, 0, -1)
		groups := 0
		for i, k := range pl.group {
			if k < 2 {
				continue
			}
			groups++
			ids := []string{}
			seen := map[int]bool{}
			for j := i; j < i+k; j++ {
				ids = append(ids, p.Nodes[j].ID)
				require.False(t, seen[pl.buf[j]], "node %s shares a buffer within its group", p.Nodes[j].ID)
				seen[pl.buf[j]] = true
				require.NotEqual(t, pl.buf[p.Nodes[i].In[0]], pl.buf[j], "node %s writes its input", p.Nodes[j].ID)
			}
			require.Contains(t, [][]string{{"q0", "k0", "v"}, {"g", "u"}}, ids)
		}
		require.Equal(t, 10, groups, "two groups per layer")
	}

	run := func() [][]float32 {
		s := p.NewSession(64, pool)
		var out [][]float32
		for _, toks := range [][]int{{1, 403, 407, 12}, {13}, {300}} {
			l, err := s.Forward(toks, false)
			require.NoError(t, err)
			out = append(out, append([]float32(nil), l.Data...))
		}
		return out
	}
	grouped := run()
	mm, _ := ops.Lookup("matmul")
	saved := mm.RunGroup
	mm.RunGroup = nil
	defer func() { mm.RunGroup = saved }()
	for k, l := range run() {
		require.InDeltaSlice(t, l, grouped[k], 1e-4, "forward %d", k)
	}
}
