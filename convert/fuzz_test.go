package convert

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pinfer/pinfer/internal/fixtures"
	"github.com/stretchr/testify/require"
)

// FuzzConfig: any config.json either fails with one short line that starts
// with its path, or gives hyperparameters that the GGUF file can carry
// (positive sizes, whole heads, finite positive float32 eps and theta).
func FuzzConfig(f *testing.F) {
	seeds, err := filepath.Glob(filepath.Join(fixtures.Dir(f), "arch", "*", "config.json"))
	require.NoError(f, err)
	for _, p := range seeds {
		b, err := os.ReadFile(p)
		require.NoError(f, err)
		f.Add(b)
	}
	f.Add([]byte(`{"model_type": "llama", "rope_scaling": [1,
	 2]}`))
	f.Add([]byte(`{"model_type": "llama", "hidden_size": [1,
	2]}`))
	dir := f.TempDir()
	path := filepath.Join(dir, "config.json")
	f.Fuzz(func(t *testing.T, data []byte) {
		require.NoError(t, os.WriteFile(path, data, 0o644))
		hp, err := readConfig(dir)
		if err != nil {
			msg := err.Error()
			if !strings.HasPrefix(msg, path+": ") || strings.ContainsAny(msg, "\n\r") || len(msg) > len(path)+300 {
				t.Fatalf("error is not one short line naming the file: %q", msg)
			}
			return
		}
		for name, n := range map[string]int{"n_embd": hp.nEmbd, "n_ff": hp.nFF, "n_layer": hp.nLayer, "n_head": hp.nHead, "n_head_kv": hp.nHeadKV, "head_dim": hp.headDim, "n_vocab": hp.nVocab, "n_ctx": hp.nCtx} {
			if n < 1 || n > math.MaxInt32 {
				t.Fatalf("%s = %d", name, n)
			}
		}
		if hp.nHead%hp.nHeadKV != 0 {
			t.Fatalf("n_head %d, n_head_kv %d", hp.nHead, hp.nHeadKV)
		}
		for name, x := range map[string]float64{"eps": hp.eps, "rope_theta": hp.ropeTheta} {
			if f := float32(x); !(f > 0) || math.IsInf(float64(f), 0) {
				t.Fatalf("%s = %v is not a positive finite float32", name, x)
			}
		}
	})
}
