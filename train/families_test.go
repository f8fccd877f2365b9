package train

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pinfer/pinfer/convert"
	"github.com/pinfer/pinfer/engine"
	"github.com/pinfer/pinfer/gguf"
	"github.com/pinfer/pinfer/internal/fixtures"
	"github.com/pinfer/pinfer/ops"
	"github.com/pinfer/pinfer/predictors"
	"github.com/pinfer/pinfer/profile"
	"github.com/pinfer/pinfer/sample"
	"github.com/stretchr/testify/require"
)

// The sparse path on every family: train predictors on a converted fixture
// (one per expert for the mixture, stacked in the file), load the PWRI file
// it writes, run it with the mlp predictor it then picks, and check on the
// trained tokens that the predictors find what the real gate fires.
func TestTrainEveryFamily(t *testing.T) {
	entries, err := os.ReadDir(fixtures.Path(t, "arch"))
	require.NoError(t, err)
	require.NotEmpty(t, entries)
	pool := ops.NewPool(2)
	defer pool.Close()
	for _, e := range entries {
		t.Run(e.Name(), func(t *testing.T) {
			start := time.Now()
			dir := t.TempDir()
			src := filepath.Join(dir, "m.gguf")
			require.NoError(t, convert.Convert(fixtures.Path(t, "arch", e.Name()), src, convert.Options{Type: ops.F32}))
			m, err := engine.Load(src, "")
			require.NoError(t, err)
			defer m.Close()
			tokens := pseudoRandomIDs(1280, m.Prog.Vocab)
			out := filepath.Join(dir, "pwri.gguf")
			const nctx = 64
			reps, err := Train(m, tokens, out, Config{Options: Options{Pool: pool}, Ctx: nctx})
			require.NoError(t, err)
			require.Len(t, reps, len(m.Prog.Layers))
			for _, r := range reps {
				t.Logf("held-out: layer %s rank %d recall %.4f precision %.4f predicted %.3f true %.3f", r.Name(), r.Rank, r.Recall, r.Precision, r.Predicted, r.True)
				require.False(t, r.Dense, "layer %s got too few tokens to fit", r.Name())
			}
			checkPredictorTensors(t, out, m)

			pm, err := engine.Load(out, "")
			require.NoError(t, err)
			defer pm.Close()
			p, err := pm.Predictor("")
			require.NoError(t, err)
			require.Equal(t, "mlp", p.Name())
			res, err := pm.GenerateIDs([]int{1, 17, 230}, engine.Options{N: 16, Pool: pool, Sample: sample.Params{Temp: 0}, Predictor: p})
			require.NoError(t, err)
			require.Len(t, res.Tokens, 16)
			require.NotNil(t, res.Stats)
			require.Equal(t, "mlp", res.Stats.Predictor)
			require.Len(t, res.Stats.ActiveFraction, len(pm.Prog.Layers))
			ran := 0
			for k, f := range res.Stats.ActiveFraction {
				l := pm.Prog.Layers[k]
				require.Less(t, f, 1.0, "layer %d expert %d computed every neuron", l.Index, l.Expert)
				if f > 0 {
					ran++
				}
			}
			require.Positive(t, ran)

			rec := recallOnTokens(t, pm, p, tokens, nctx, pool)
			require.Len(t, rec, len(pm.Prog.Layers), "an FFN never ran")
			for _, l := range pm.Prog.Layers {
				r := rec[l]
				t.Logf("trained tokens: layer %d expert %d recall %.4f", l.Index, l.Expert, r)
				require.GreaterOrEqual(t, r, 0.9, "layer %d expert %d", l.Index, l.Expert)
			}

			// Evaluate keeps experts apart and counts OPT's gate bias.
			ev, err := Evaluate(pm, p, tokens[:4*nctx], nctx, pool, nil)
			require.NoError(t, err)
			require.NotEmpty(t, ev.Layers)
			for _, r := range ev.Layers {
				require.GreaterOrEqual(t, r.Recall, 0.9, "layer %s", r.Name())
			}
			t.Logf("Evaluate: mean recall %.4f, perplexity dense %.2f sparse %.2f", ev.Recall, ev.DensePPL, ev.SparsePPL)
			t.Logf("%s in %v", e.Name(), time.Since(start))
		})
	}
}

// pseudoRandomIDs are n token ids from a fixed xorshift sequence.
func pseudoRandomIDs(n, vocab int) []int {
	ids := make([]int, n)
	s := uint64(0x2545F4914F6CDD1D)
	for i := range ids {
		s ^= s << 13
		s ^= s >> 7
		s ^= s << 17
		ids[i] = int(s % uint64(vocab))
	}
	return ids
}

// checkPredictorTensors checks the names and shapes of the predictors in
// the written file: fc1 {n_embd, R} and fc2 {R, n_ff} per block, stacked
// {n_embd, R, n_expert} and {R, n_ff, n_expert} for a mixture.
func checkPredictorTensors(t *testing.T, path string, m *engine.Model) {
	f, err := gguf.Open(path)
	require.NoError(t, err)
	defer f.Close()
	require.Equal(t, "PWRI", f.Magic)
	experts := map[int]int{}
	for _, l := range m.Prog.Layers {
		experts[l.Index]++
	}
	for b, n := range experts {
		l := m.Prog.Layers[0]
		if n == 1 {
			fc1, ok := f.Tensor(blk(b, "fc1"))
			require.True(t, ok)
			fc2, ok := f.Tensor(blk(b, "fc2"))
			require.True(t, ok)
			require.Equal(t, []uint64{uint64(l.NEmbd), fc1.Dims[1]}, fc1.Dims)
			require.Equal(t, []uint64{fc1.Dims[1], uint64(l.NFF)}, fc2.Dims)
			continue
		}
		fc1, ok := f.Tensor(blk(b, "ffn_fc1_exps"))
		require.True(t, ok)
		fc2, ok := f.Tensor(blk(b, "ffn_fc2_exps"))
		require.True(t, ok)
		require.Equal(t, []uint64{uint64(l.NEmbd), fc1.Dims[1], uint64(n)}, fc1.Dims)
		require.Equal(t, []uint64{fc1.Dims[1], uint64(l.NFF), uint64(n)}, fc2.Dims)
		require.Equal(t, ops.F16, fc1.Type)
		_, plain := f.Tensor(blk(b, "fc1"))
		require.False(t, plain)
	}
}

// recallOnTokens runs tokens in the windows training collected them in,
// with predictor p, and returns per FFN the share of the neurons whose real
// gate (with its bias) fires that p chose.
func recallOnTokens(t *testing.T, m *engine.Model, p predictors.Predictor, tokens []int, nctx int, pool *ops.Pool) map[*predictors.Layer]float64 {
	type count struct{ hit, fired float64 }
	counts := map[*predictors.Layer]*count{}
	observe := func(l *predictors.Layer, in predictors.Input, active []int32) {
		c := counts[l]
		if c == nil {
			c = &count{}
			counts[l] = c
		}
		chosen := map[int32]bool{}
		for _, i := range active {
			chosen[i] = true
		}
		row := make([]float32, l.NEmbd)
		for i := range l.NFF {
			l.Gate.RowF32(i, row)
			var g float64
			for j, w := range row {
				g += float64(w) * float64(in.Normed[j])
			}
			if l.GateBias != nil {
				g += float64(l.GateBias[i])
			}
			if g > float64(l.Threshold) {
				c.fired++
				if active == nil || chosen[int32(i)] {
					c.hit++
				}
			}
		}
	}
	_, err := profile.Walk(m, tokens, nctx, pool, p, observe, nil)
	require.NoError(t, err)
	out := map[*predictors.Layer]float64{}
	for l, c := range counts {
		out[l] = c.hit / max(c.fired, 1)
	}
	return out
}

// An expert the text routed too few tokens to gets a predictor that keeps
// every neuron; a plain layer with as few is an error that names it.
func TestFitTooFewSamples(t *testing.T) {
	const in, nff, n = 8, 4, 5
	gate, err := ops.NewMatrix(ops.F32, nff, in, make([]byte, 4*nff*in))
	require.NoError(t, err)
	l := &predictors.Layer{Index: 3, Expert: 2, NEmbd: in, NFF: nff, Gate: gate, Act: "relu"}
	d := &Data{Layer: l, Experts: 4, N: n, Off: make([]int, n+1)}
	for i := range n * in {
		d.X = append(d.X, float32(i%7)-2.5)
	}
	d.Normed = d.X
	d.Y = make([]uint64, n)
	nets, reps, err := Fit([]*Data{d}, Options{})
	require.NoError(t, err)
	require.True(t, reps[0].Dense)
	require.Equal(t, "3/2", reps[0].Name())
	h, s := make([]float32, n*nets[0].Hidden), make([]float32, n*nff)
	nets[0].Scores(nil, d.X, n, h, s)
	for i, v := range s {
		require.Greater(t, v, float32(0), "score %d", i)
	}
	d.Experts = 0
	_, _, err = Fit([]*Data{d}, Options{})
	require.ErrorContains(t, err, "layer 3: 5 samples are too few to fit inputs of 8 and hold some out")
}

// Settings outside their ranges are refused by flag before any work: a
// hold-out share of 1.5 used to slice past the samples' end and panic.
func TestOptionsCheck(t *testing.T) {
	const in, nff, n = 8, 4, 5
	gate, err := ops.NewMatrix(ops.F32, nff, in, make([]byte, 4*nff*in))
	require.NoError(t, err)
	l := &predictors.Layer{Index: 1, NEmbd: in, NFF: nff, Gate: gate, Act: "relu"}
	d := &Data{Layer: l, N: n, Off: make([]int, n+1), X: make([]float32, n*in), Normed: make([]float32, n*in), Y: make([]uint64, n)}
	for want, o := range map[string]Options{
		"--holdout 1.5: want a share in (0, 1)": {Holdout: 1.5},
		"--holdout -0.1":                        {Holdout: -0.1},
		"--recall 1.5: want a share in (0, 1]":  {Recall: 1.5},
		"--kept 2":                              {Kept: 2},
		"--epochs -1":                           {Epochs: -1},
		"--rank 3: want an even number of at least 4, or 0 for each layer's own": {Rank: 3},
	} {
		_, _, err := Fit([]*Data{d}, o)
		require.ErrorContains(t, err, want)
	}
	require.NoError(t, (&Options{Rank: 4, Holdout: 0.5}).Check())
	require.ErrorContains(t, (&Config{Ctx: -1}).Check(), "-c -1")
	require.ErrorContains(t, (&Config{MaxTokens: -2}).Check(), "--max-tokens -2")
}
