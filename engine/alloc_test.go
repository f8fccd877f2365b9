package engine

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pinfer/pinfer/internal/fixtures"
	"github.com/pinfer/pinfer/models"
	"github.com/pinfer/pinfer/ops"
	"github.com/pinfer/pinfer/synth"
)

// A decode step in the steady state allocates nothing: dense, with the
// oracle, and with a file's own fc1/fc2 predictor on q4_0 weights (the AVX
// kernels' path), over an f32 and an f16 KV cache, on two threads.
func TestDecodeAllocatesNothing(t *testing.T) {
	if raceOn {
		t.Skip("under -race sync.Pool drops pooled buffers at random; the count is the plain build's")
	}
	shakespeare, err := models.DefaultModelPath()
	require.NoError(t, err)
	gen := filepath.Join(t.TempDir(), "gen.gguf")
	shape := synth.Shape{NEmbd: 128, NFF: 512, NLayer: 2, NHead: 4, NKVHead: 2, Vocab: 300, Rank: 64}
	require.NoError(t, synth.Write(gen, synth.Options{Shape: shape, Active: 0.1, Type: ops.Q4_0, Seed: 1}, nil))
	for _, c := range []struct{ path, pred string }{
		{fixtures.Path(t, "stories260K", "stories260K.gguf"), "dense"},
		{shakespeare, "oracle"},
		{gen, "mlp"},
		{gen, "dense"}, // q4_0 FFNs packed for dense reads, where that pays
	} {
		m, err := Load(c.path, "")
		require.NoError(t, err)
		pred, err := m.Predictor(c.pred)
		require.NoError(t, err)
		m.WaitPacked()
		pool := ops.NewPool(2)
		for _, kv := range []ops.DType{ops.F32, ops.F16} {
			m.KVType = kv
			s := m.NewSession(64, pool)
			s.SetPredictor(pred)
			tok := 1
			step := func() {
				l, err := s.Forward([]int{tok}, false)
				require.NoError(t, err)
				tok = (tok*7 + len(l.Data)) % 100 // another token each step
			}
			for range 4 {
				step()
			}
			allocs := testing.AllocsPerRun(20, step)
			require.Zero(t, allocs, "%s, %s predictor, KV %v: allocations per decode step", c.path, c.pred, kv)
		}
		pool.Close()
		m.Close()
	}
}
