package train

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/pinfer/pinfer/convert"
	"github.com/pinfer/pinfer/engine"
	"github.com/pinfer/pinfer/gguf"
	"github.com/pinfer/pinfer/internal/fixtures"
	"github.com/pinfer/pinfer/ops"
	"github.com/pinfer/pinfer/sample"
	"github.com/stretchr/testify/require"
)

var (
	tmpDir      string
	trainOnce   sync.Once
	trainedPath string
	trainErr    error
	trainReps   []Report
)

func TestMain(m *testing.M) {
	d, err := os.MkdirTemp("", "pinfer-train-")
	if err != nil {
		panic(err)
	}
	tmpDir = d
	code := m.Run()
	os.RemoveAll(d)
	os.Exit(code)
}

// trained converts the Shakespeare fixture and trains its predictors on
// the start of train.txt, once per test run. Adam is left out (Epochs 0):
// on this fixture it did not improve the linear start at the recall the
// bars need (measured: 1.43x against 1.38x predicted/true at recall 0.999).
func trained(t *testing.T) string {
	trainOnce.Do(func() {
		src := filepath.Join(tmpDir, "shakespeare-f32.gguf")
		if trainErr = convert.Convert(fixtures.Path(t, "shakespeare-relu-6m"), src, convert.Options{Type: ops.F32}); trainErr != nil {
			return
		}
		var m *engine.Model
		if m, trainErr = engine.Load(src, ""); trainErr != nil {
			return
		}
		defer m.Close()
		text, err := os.ReadFile(fixtures.Path(t, "shakespeare-relu-6m", "train.txt"))
		if trainErr = err; err != nil {
			return
		}
		pool := ops.NewPool(2)
		defer pool.Close()
		trainedPath = filepath.Join(tmpDir, "shakespeare-pwri.gguf")
		start := time.Now()
		trainReps, trainErr = Train(m, m.Encode(string(text)), trainedPath, Config{Options: Options{Recall: 0.99, Kept: 0.99999, Pool: pool}, Ctx: 256, MaxTokens: 12000})
		t.Logf("trained in %v", time.Since(start))
	})
	require.NoError(t, trainErr)
	return trainedPath
}

func TestTrainedFileFormat(t *testing.T) {
	path := trained(t)
	for _, r := range trainReps {
		t.Logf("held-out split: layer %d rank %d recall %.4f mass kept %.6f precision %.4f predicted %.4f true %.4f", r.Layer, r.Rank, r.Recall, r.Mass, r.Precision, r.Predicted, r.True)
		require.GreaterOrEqual(t, r.Recall, 0.99)
	}
	f, err := gguf.Open(path)
	require.NoError(t, err)
	defer f.Close()
	require.Equal(t, "PWRI", f.Magic)
	th, err := f.Float("powerinfer.sparse_threshold")
	require.NoError(t, err)
	require.Equal(t, 0.0, th)
	for i, r := range trainReps {
		fc1, ok := f.Tensor(blk(i, "fc1"))
		require.True(t, ok)
		require.Equal(t, []uint64{256, uint64(r.Rank)}, fc1.Dims)
		fc2, ok := f.Tensor(blk(i, "fc2"))
		require.True(t, ok)
		require.Equal(t, []uint64{uint64(r.Rank), 1024}, fc2.Dims)
		dt, ok := f.Tensor(blk(i, "ffn_down_t"))
		require.True(t, ok)
		require.Equal(t, []uint64{256, 1024}, dt.Dims)
		// The transposed copy holds the same numbers: down[e][n] = down_t[n][e].
		d, _ := f.Tensor(blk(i, "ffn_down"))
		require.Equal(t, []uint64{1024, 256}, d.Dims)
		dm, err := ops.NewMatrix(d.Type, 256, 1024, f.Data(d))
		require.NoError(t, err)
		tm, err := ops.NewMatrix(dt.Type, 1024, 256, f.Data(dt))
		require.NoError(t, err)
		row, col := make([]float32, 1024), make([]float32, 256)
		dm.RowF32(7, row)
		tm.RowF32(300, col)
		require.Equal(t, row[300], col[7])
	}
	m, err := engine.Load(path, "")
	require.NoError(t, err)
	defer m.Close()
	p, err := m.Predictor("")
	require.NoError(t, err)
	require.Equal(t, "mlp", p.Name())
}

func blk(i int, name string) string {
	return "blk." + itoa(i) + "." + name + ".weight"
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

// The bar, on text never trained on: mean recall at least 0.99 with
// at most 1.5x the neurons that really fire, perplexity within 1% of dense,
// and at least 48 of 64 greedy ids as dense for each reference prompt.
func TestTrainedPredictorOnHeldout(t *testing.T) {
	path := trained(t)
	m, err := engine.Load(path, "")
	require.NoError(t, err)
	defer m.Close()
	p, err := m.Predictor("mlp")
	require.NoError(t, err)
	text, err := os.ReadFile(fixtures.Path(t, "shakespeare-relu-6m", "heldout.txt"))
	require.NoError(t, err)
	pool := ops.NewPool(2)
	defer pool.Close()
	tokens := m.Encode(string(text))[:2048]
	e, err := Evaluate(m, p, tokens, 256, pool, nil)
	require.NoError(t, err)
	for _, r := range e.Layers {
		t.Logf("heldout.txt: layer %d recall %.4f precision %.4f predicted %.4f true %.4f (%.2fx)", r.Layer, r.Recall, r.Precision, r.Predicted, r.True, r.Predicted/r.True)
	}
	t.Logf("mean recall %.4f; perplexity dense %.4f sparse %.4f (%+.3f%%)", e.Recall, e.DensePPL, e.SparsePPL, 100*(e.SparsePPL/e.DensePPL-1))
	require.GreaterOrEqual(t, e.Recall, 0.99)
	// The bound is on the mean over layers, as the recall is.
	var pred, truth float64
	for _, r := range e.Layers {
		pred += r.Predicted
		truth += r.True
	}
	t.Logf("mean predicted active fraction %.4f, true %.4f (%.2fx)", pred/6, truth/6, pred/truth)
	require.LessOrEqual(t, pred, 1.5*truth)
	require.InEpsilon(t, e.DensePPL, e.SparsePPL, 0.01)

	var ref struct {
		Prompts []struct {
			Text string `json:"text"`
		} `json:"prompts"`
	}
	b, err := os.ReadFile(fixtures.Path(t, "shakespeare-relu-6m", "reference.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &ref))
	require.Len(t, ref.Prompts, 4)
	agree := map[string]int{}
	for _, pr := range ref.Prompts {
		opt := engine.Options{Prompt: pr.Text, N: 64, Pool: pool, Sample: sample.Params{Temp: 0}}
		dense, err := m.Generate(opt)
		require.NoError(t, err)
		opt.Predictor = p
		sparse, err := m.Generate(opt)
		require.NoError(t, err)
		same := 0
		for i := range dense.Tokens {
			if i < len(sparse.Tokens) && sparse.Tokens[i] == dense.Tokens[i] {
				same++
			}
		}
		t.Logf("prompt %q: %d of %d greedy ids as dense", pr.Text, same, len(dense.Tokens))
		agree[pr.Text] = same
	}
	for text, same := range agree {
		require.GreaterOrEqual(t, same, 48, "prompt %q", text)
	}
}
