package hybrid

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pinfer/pinfer/convert"
	"github.com/pinfer/pinfer/engine"
	"github.com/pinfer/pinfer/graph"
	"github.com/pinfer/pinfer/ops"
	"github.com/pinfer/pinfer/placement"
	"github.com/pinfer/pinfer/predictors"
	"github.com/stretchr/testify/require"
)

// sharedModels finds ../shared/models by walking up from the package.
func sharedModels(t *testing.T) string {
	dir, err := os.Getwd()
	require.NoError(t, err)
	for {
		p := filepath.Join(dir, "shared", "models")
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			return p
		}
		up := filepath.Dir(dir)
		if up == dir {
			t.Fatal("shared/models not found above the working directory")
		}
		dir = up
	}
}

// shakespeare loads a private copy of the built-in model (6 layers, d=256,
// n_ff=1024, f16), so that indexes cached beside it land in a temp dir.
func shakespeare(t *testing.T) *engine.Model {
	path := filepath.Join(t.TempDir(), "shakespeare.gguf")
	in, err := os.Open("../models/shakespeare-relu-6m-f16.gguf")
	require.NoError(t, err)
	defer in.Close()
	out, err := os.Create(path)
	require.NoError(t, err)
	_, err = io.Copy(out, in)
	require.NoError(t, err)
	require.NoError(t, out.Close())
	m, err := engine.Load(path, "")
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })
	return m
}

// tensorBytes sums the sizes of the file's tensors whose names pass keep.
func tensorBytes(m *engine.Model, keep func(string) bool) uint64 {
	var n uint64
	for _, t := range m.File.Tensors {
		if keep(t.Name) {
			n += t.Size
		}
	}
	return n
}

func TestSplitTakesLastLayersThenOutput(t *testing.T) {
	m := shakespeare(t)
	layer := func(i int) uint64 { // attention, norms and the whole FFN of block i
		return tensorBytes(m, func(s string) bool { return strings.HasPrefix(s, "blk."+string(rune('0'+i))+".") })
	}
	two := layer(5) + layer(4)
	p, err := SplitPlan(m, two+layer(3)-1)
	require.NoError(t, err)
	require.Equal(t, two, p.Used)
	require.ElementsMatch(t, []string{"blk.5.attn", "blk.5.rest", "blk.4.attn", "blk.4.rest"}, p.Dense)
	require.Len(t, p.Layers, 2)
	for _, l := range p.Layers {
		require.Len(t, l.GPU, 1024)
	}
	var total uint64
	for _, ts := range m.File.Tensors {
		total += ts.Size
	}
	p, err = SplitPlan(m, total)
	require.NoError(t, err)
	require.Contains(t, p.Dense, "output")
	require.Len(t, p.Layers, 6)
}

func TestResidentMapsPartsToMatrices(t *testing.T) {
	m := shakespeare(t)
	plan := &placement.Plan{Dense: []string{"blk.0.attn", "output"}, Layers: []placement.LayerPlan{{Index: 1, NFF: 1024, GPU: []int32{3, 5}}}}
	r, err := Resident(m.Prog, plan)
	require.NoError(t, err)
	var names []string
	for _, n := range m.Prog.Nodes {
		if (n.Op.Name == "matmul" || n.Op.Name == "output") && contains(r.Dense, n.W[0].M) {
			names = append(names, n.W[0].Name)
		}
	}
	require.ElementsMatch(t, []string{"blk.0.attn_q.weight", "blk.0.attn_k.weight", "blk.0.attn_v.weight", "blk.0.attn_output.weight", "output.weight"}, names)
	require.Len(t, r.Dense, 5)
	require.Len(t, r.FFNs, 1)
	f := r.FFNs[0]
	require.Same(t, m.Prog.Layers[1].Gate, f.Gate)
	require.Equal(t, []int32{3, 5}, f.Hot)
	require.Equal(t, "relu", f.Act)
	require.Equal(t, 1024, f.Down.Rows)
	require.Equal(t, 256, f.Down.Cols)

	bad := &placement.Plan{Layers: []placement.LayerPlan{{Index: 1, NFF: 999, GPU: []int32{3}}}}
	_, err = Resident(m.Prog, bad)
	require.ErrorContains(t, err, "999")
}

func contains(ms []*ops.Matrix, m *ops.Matrix) bool {
	for _, x := range ms {
		if x == m {
			return true
		}
	}
	return false
}

// The index is made once, cached beside the model, reused for the same
// budget, and made again on reset or for another budget.
func TestPlanCachesIndex(t *testing.T) {
	m := shakespeare(t)
	stats := filepath.Join(sharedModels(t), "shakespeare-relu-6m", "activation_stats.json")
	var log strings.Builder
	o := Options{Budget: 4 << 20, Stats: stats, Log: &log}
	p1, err := Plan(m, o)
	require.NoError(t, err)
	require.LessOrEqual(t, p1.Used, o.Budget)
	require.FileExists(t, m.Path+".generated.gpuidx")
	require.Contains(t, log.String(), "wrote")

	log.Reset()
	p2, err := Plan(m, o)
	require.NoError(t, err)
	require.Contains(t, log.String(), "gpu index: "+m.Path+".generated.gpuidx")
	require.Equal(t, p1.Dense, p2.Dense)
	for i := range p1.Layers {
		require.Equal(t, p1.Layers[i].GPU, p2.Layers[i].GPU)
	}

	log.Reset()
	o.Reset = true
	_, err = Plan(m, o)
	require.NoError(t, err)
	require.Contains(t, log.String(), "wrote")

	ix, err := placement.ReadIndex(m.Path + ".generated.gpuidx")
	require.NoError(t, err)
	require.Equal(t, o.Budget, ix.VRAMCapacity)
	// Within a layer the most active neurons are the ones placed.
	st, err := predictors.ReadStats(stats)
	require.NoError(t, err)
	placed := 0
	for li, l := range ix.Layers {
		gpu := map[int32]bool{}
		for _, id := range l.Bucket {
			gpu[id] = true
		}
		placed += len(l.Bucket)
		lo, hi := float32(2), float32(-1)
		for id, r := range st.Layers[li].Frequency {
			if gpu[int32(id)] {
				lo = min(lo, r)
			} else {
				hi = max(hi, r)
			}
		}
		if len(l.Bucket) > 0 {
			require.GreaterOrEqual(t, lo, hi, "layer %d", l.Index)
		}
	}
	require.Greater(t, placed, 0)

	log.Reset()
	o.Disable, o.Reset = false, false
	o.Budget = 2 << 20
	_, err = Plan(m, o)
	require.NoError(t, err)
	require.Contains(t, log.String(), "wrote", "another budget makes a new index")
}

func TestDisableIndexPlacesNoNeurons(t *testing.T) {
	m := shakespeare(t)
	p, err := Plan(m, Options{Budget: 1 << 30, Disable: true})
	require.NoError(t, err)
	require.NoFileExists(t, m.Path+".generated.gpuidx")
	require.Contains(t, p.Dense, "blk.0.attn")
	require.Contains(t, p.Dense, "output")
	for _, l := range p.Layers {
		require.Empty(t, l.GPU)
	}
}

func TestBudgetZeroPlacesNothing(t *testing.T) {
	m := shakespeare(t)
	p, err := Plan(m, Options{})
	require.NoError(t, err)
	r, err := Resident(m.Prog, p)
	require.NoError(t, err)
	require.Empty(t, r.Dense)
	require.Empty(t, r.FFNs)
	require.NoFileExists(t, m.Path+".generated.gpuidx")
}

// Without a profile the rates come from a short calibration run, in which a
// ReLU model's neurons do not all fire alike.
func TestPlanCalibratesWithoutStats(t *testing.T) {
	m := shakespeare(t)
	var log strings.Builder
	p, err := Plan(m, Options{Budget: 4 << 20, Log: &log})
	require.NoError(t, err)
	require.Contains(t, log.String(), "calibration")
	st, err := Calibrate(m, nil)
	require.NoError(t, err)
	require.Equal(t, CalibrationTokens, st.Tokens)
	placed := 0
	for i, l := range st.Layers {
		require.Greater(t, l.MeanActiveFraction, 0.05, "layer %d", i)
		require.Less(t, l.MeanActiveFraction, 0.6, "layer %d", i)
		placed += len(p.Layers[i].GPU)
	}
	require.Greater(t, placed, 0)
}

// A plan naming a mixture's blk.N.exps puts that layer's router and each
// expert's gate, up and down on the GPU, as the matrices the moe op runs
// (ops.ExpertRows, the same pointers every call, which the predictors'
// layers hold too), and nothing of the other layer; a plan without it,
// none.
func TestResidentPlacesExperts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "moe.gguf")
	require.NoError(t, convert.Convert(filepath.Join(sharedModels(t), "arch", "mixtral-relu-moe"), path, convert.Options{Type: ops.F32, Logf: t.Logf}))
	m, err := engine.Load(path, "")
	require.NoError(t, err)
	defer m.Close()
	r, err := Resident(m.Prog, &placement.Plan{Dense: []string{"blk.1.exps"}})
	require.NoError(t, err)
	var moes []*graph.Node
	for _, n := range m.Prog.Nodes {
		if n.Op.Name == "moe" {
			moes = append(moes, n)
		}
	}
	require.Len(t, moes, 2)
	n := moes[1]
	nE := n.W[0].M.Rows
	want := []*ops.Matrix{n.W[0].M}
	for _, w := range n.W[1:4] {
		for e := range nE {
			want = append(want, ops.ExpertRows(w.M, e, w.M.Rows/nE))
		}
	}
	// Pointers, not equal values: the backend finds a matrix by its address.
	require.Len(t, r.Dense, len(want))
	for i := range want {
		require.Same(t, want[i], r.Dense[i], "matrix %d", i)
	}
	for _, l := range m.Prog.Layers {
		if l.Index == 1 {
			require.True(t, slices.Contains(r.Dense, l.Gate) && slices.Contains(r.Dense, l.Up), "expert %d's gate and up, as the predictors see them", l.Expert)
		}
	}
	for _, w := range moes[0].W[:4] {
		for _, d := range r.Dense {
			require.NotSame(t, w.M, d)
			require.True(t, &w.M.Data[0] != &d.Data[0], "nothing of block 0")
		}
	}
	r, err = Resident(m.Prog, &placement.Plan{Dense: []string{"blk.1.attn"}})
	require.NoError(t, err)
	require.NotContains(t, r.Dense, n.W[0].M)
	require.Len(t, r.Dense, 4, "q, k, v and output of block 1")
}

// llama.cpp's -ngl split of a mixture of experts: whole blocks from the
// last down, each with its experts (blk.N.exps), which no neuron layer
// stands for, then the output once every block is on the GPU.
func TestSplitTakesExperts(t *testing.T) {
	m := &placement.Model{Parts: []placement.Part{
		{Name: "blk.0.attn", Layer: 0, Bytes: 10}, {Name: "blk.0.exps", Layer: 0, Bytes: 40},
		{Name: "blk.1.attn", Layer: 1, Bytes: 10}, {Name: "blk.1.exps", Layer: 1, Bytes: 40},
		{Name: "output", Layer: -1, Bytes: 5},
	}}
	p := Split(m, 99)
	require.Equal(t, []string{"blk.1.attn", "blk.1.exps"}, p.Dense)
	require.Equal(t, uint64(50), p.Used)
	require.Empty(t, p.Layers)
	p = Split(m, 105)
	require.Equal(t, []string{"blk.1.attn", "blk.1.exps", "blk.0.attn", "blk.0.exps", "output"}, p.Dense)
}

// A model without sparse FFNs (stories260K: SiLU, its FFN three matmuls a
// block) is planned without a profile: its FFNs are blk.N.ffn parts, which
// Resident maps to those matmuls' matrices.
func TestPlanDenseModel(t *testing.T) {
	path := filepath.Join(t.TempDir(), "stories.gguf")
	in, err := os.ReadFile(filepath.Join(sharedModels(t), "stories260K", "stories260K.gguf"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, in, 0o644))
	m, err := engine.Load(path, "")
	require.NoError(t, err)
	defer m.Close()
	require.Empty(t, m.Prog.Layers)
	plan, err := Plan(m, Options{Budget: uint64(len(in)) / 2, Reset: true})
	require.NoError(t, err)
	require.Empty(t, plan.Layers)
	require.NotEmpty(t, plan.Dense)
	require.LessOrEqual(t, plan.Used, uint64(len(in))/2)

	r, err := Resident(m.Prog, &placement.Plan{Dense: []string{"blk.4.ffn"}})
	require.NoError(t, err)
	var want []*ops.Matrix
	for _, n := range m.Prog.Nodes {
		if n.Op.Name == "matmul" && strings.HasPrefix(n.W[0].Name, "blk.4.ffn_") {
			want = append(want, n.W[0].M)
		}
	}
	require.Len(t, want, 3)
	require.Len(t, r.Dense, 3)
	for i := range want {
		require.Same(t, want[i], r.Dense[i])
	}
}

// llama.cpp's split of a dense model: the last blocks whole (attention and
// the FFN's matmuls), then the output.
func TestSplitPlanDenseModel(t *testing.T) {
	m, err := engine.Load(filepath.Join(sharedModels(t), "stories260K", "stories260K.gguf"), "")
	require.NoError(t, err)
	defer m.Close()
	block := func(i int) uint64 {
		return tensorBytes(m, func(s string) bool { return strings.HasPrefix(s, fmt.Sprintf("blk.%d.", i)) })
	}
	p, err := SplitPlan(m, block(4)+block(3)+block(2)-1)
	require.NoError(t, err)
	require.Equal(t, block(4)+block(3), p.Used)
	require.ElementsMatch(t, []string{"blk.4.attn", "blk.4.ffn", "blk.4.rest", "blk.3.attn", "blk.3.ffn", "blk.3.rest"}, p.Dense)
}
