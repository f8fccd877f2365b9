package synth

import (
	"crypto/sha256"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/pinfer/pinfer/engine"
	"github.com/pinfer/pinfer/gguf"
	"github.com/pinfer/pinfer/ops"
	"github.com/stretchr/testify/require"
)

var small = Shape{NEmbd: 128, NFF: 512, NLayer: 3, NHead: 4, NKVHead: 2, Vocab: 300, Rank: 64}

func TestWriteIsDeterministicPowerInferLayout(t *testing.T) {
	dir := t.TempDir()
	o := Options{Shape: small, Active: 0.1, Type: ops.Q4_0, Seed: 3}
	a, b := filepath.Join(dir, "a.gguf"), filepath.Join(dir, "b.gguf")
	require.NoError(t, Write(a, o, nil))
	require.NoError(t, Write(b, o, nil))
	ha, hb := hashFile(t, a), hashFile(t, b)
	require.Equal(t, ha, hb, "same seed, same file")
	o.Seed = 4
	require.NoError(t, Write(b, o, nil))
	require.NotEqual(t, ha, hashFile(t, b))

	f, err := gguf.Open(a)
	require.NoError(t, err)
	defer f.Close()
	require.Equal(t, "PWRI", f.Magic)
	for _, name := range []string{"blk.2.fc1.weight", "blk.2.fc2.weight", "blk.0.ffn_down_t.weight", "blk.1.ffn_gate.weight"} {
		_, ok := f.Tensor(name)
		require.True(t, ok, name)
	}
	fc2, _ := f.Tensor("blk.0.fc2.weight")
	require.Equal(t, []uint64{64, 512}, fc2.Dims) // {R, n_ff}
	down, _ := f.Tensor("blk.0.ffn_down_t.weight")
	require.Equal(t, []uint64{128, 512}, down.Dims) // {n_embd, n_ff}
	require.Equal(t, ops.Q4_0, down.Type)
}

// The file runs, and its neurons fire (by the real gate) and are predicted
// (by its fc1/fc2) at about the fraction asked for.
func TestActiveFraction(t *testing.T) {
	for _, active := range []float64{0.1, 0.3} {
		path := filepath.Join(t.TempDir(), "m.gguf")
		require.NoError(t, Write(path, Options{Shape: small, Active: active, Type: ops.F16, Seed: 1}, nil))
		m, err := engine.Load(path, "")
		require.NoError(t, err)
		for _, name := range []string{"oracle", ""} { // "" picks mlp: the file has predictors
			pred, err := m.Predictor(name)
			require.NoError(t, err)
			res, err := m.Generate(engine.Options{Prompt: "hello world, hello synthetic model", N: 24, Sample: sampleGreedy(), Predictor: pred})
			require.NoError(t, err)
			for l, f := range res.Stats.ActiveFraction {
				require.InDelta(t, active, f, active*0.5, "%s layer %d active %v", pred.Name(), l, active)
			}
		}
		m.Close()
	}
}

func hashFile(t *testing.T, p string) [32]byte {
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	return sha256.Sum256(b)
}

// A shape gen cannot write is refused by the flag that set it.
func TestCheckNamesTheFlag(t *testing.T) {
	for want, mod := range map[string]func(*Shape){
		"--n-embd 0: want at least 32":      func(s *Shape) { s.NEmbd = 0 },
		"--n-ff 500: want a multiple of 32": func(s *Shape) { s.NFF = 500 },
		"--n-layer -1: want at least 1":     func(s *Shape) { s.NLayer = -1 },
		"--vocab 100: want at least 260":    func(s *Shape) { s.Vocab = 100 },
		"--rank 0: want at least 32":        func(s *Shape) { s.Rank = 0 },
		"--n-kv-head 0: want at least 1":    func(s *Shape) { s.NKVHead = 0 },
	} {
		o := Options{Shape: small, Active: 0.1, Type: ops.Q4_0}
		require.NoError(t, o.Check())
		mod(&o.Shape)
		require.EqualError(t, o.Check(), want)
	}
}

// --active outside (0, 1] is refused, NaN included (both comparisons with
// NaN are false, so it slipped past and wrote a model that fired ~0.2%).
func TestCheckActive(t *testing.T) {
	for _, a := range []float64{0, -0.1, 1.5, math.NaN(), math.Inf(1)} {
		o := Options{Shape: small, Active: a, Type: ops.Q4_0}
		require.ErrorContains(t, o.Check(), "--active", "%v", a)
	}
	o := Options{Shape: small, Active: 1, Type: ops.Q4_0}
	require.NoError(t, o.Check())
}
