package bench

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pinfer/pinfer/convert"
	"github.com/pinfer/pinfer/engine"
	"github.com/pinfer/pinfer/internal/fixtures"
	"github.com/pinfer/pinfer/models"
	"github.com/pinfer/pinfer/ops"
)

// The built-in Shakespeare model, dense against the oracle predictor: the
// table's shape, and bytes per token counted from the file's own tensor
// list rather than from the program.
func TestRunCountsBytesAndStream(t *testing.T) {
	path, err := models.DefaultModelPath()
	require.NoError(t, err)
	m, err := engine.Load(path, "")
	require.NoError(t, err)
	rep, err := Run(m, Options{Prompts: []int{8}, Gens: []int{4}, Reps: 3, Threads: []int{2}, Modes: []string{"dense", "oracle"}})
	require.NoError(t, err)

	// Dense decode reads every tensor once, except that the embedding
	// table (output.weight is separate) gives one row per token.
	var want float64
	for _, x := range m.File.Tensors {
		switch {
		case x.Name == "token_embd.weight":
			want += float64(x.Size) / float64(x.Dims[1])
		case strings.HasSuffix(x.Name, "fc1.weight"), strings.HasSuffix(x.Name, "fc2.weight"):
		default:
			want += float64(x.Size)
		}
	}

	require.Len(t, rep.Results, 4)
	var order []string // modes as given, each with its prefill then its decode
	for _, r := range rep.Results {
		order = append(order, r.Mode+"/"+r.Test)
	}
	assert.Equal(t, []string{"dense/pp8", "dense/tg4", "oracle/pp8", "oracle/tg4"}, order)
	assert.Greater(t, rep.StreamGBps, 0.0)
	byKey := map[string]Result{}
	for _, r := range rep.Results {
		byKey[r.Mode+"/"+r.Test] = r
		require.Len(t, r.TokensPerSec, 3, r.Mode+"/"+r.Test)
		lo, hi := r.TokensPerSec[0], r.TokensPerSec[0]
		for _, v := range r.TokensPerSec {
			lo, hi = min(lo, v), max(hi, v)
		}
		assert.True(t, r.Median >= lo && r.Median <= hi, "median %v outside [%v, %v]", r.Median, lo, hi)
	}
	dense, oracle := byKey["dense/tg4"], byKey["oracle/tg4"]
	assert.InDelta(t, want, dense.BytesPerToken, 0.5)
	assert.InDelta(t, dense.BytesPerToken*dense.Median/1e9, dense.GBPerSec, 1e-9)
	assert.Greater(t, dense.StreamGBps, 0.0)
	assert.Greater(t, dense.OfStream, 0.0)
	assert.InDelta(t, dense.StreamGBps*1e9/dense.BytesPerToken, dense.BoundTPS, 1e-9*dense.BoundTPS, "the bound is the stream over the bytes per token")
	assert.Equal(t, 0.0, byKey["dense/pp8"].StreamGBps, "prefill is not held against the stream")
	// The oracle computes only firing neurons: fewer FFN bytes.
	assert.Greater(t, oracle.ActiveFrac, 0.0)
	assert.Less(t, oracle.ActiveFrac, 1.0)
	assert.Less(t, oracle.BytesPerToken, dense.BytesPerToken)
}

// -d: each test starts after that many context tokens, named as llama-bench
// names it; negative counts are refused.
func TestRunAtDepth(t *testing.T) {
	path, err := models.DefaultModelPath()
	require.NoError(t, err)
	m, err := engine.Load(path, "")
	require.NoError(t, err)
	rep, err := Run(m, Options{Prompts: []int{4}, Gens: []int{2}, Depths: []int{40}, Reps: 1, Threads: []int{2}, Modes: []string{"dense"}})
	require.NoError(t, err)
	require.Len(t, rep.Results, 2)
	for i, want := range []string{"pp4 @ d40", "tg2 @ d40"} {
		assert.Equal(t, want, rep.Results[i].Test)
		assert.Equal(t, 40, rep.Results[i].Depth)
	}
	_, err = Run(m, Options{Prompts: []int{4}, Gens: []int{2}, Depths: []int{-1}, Reps: 1, Threads: []int{2}, Modes: []string{"dense"}})
	require.ErrorContains(t, err, "-d -1")
}

// Lists, as llama-bench takes them: every prefill, decode and combined
// (--pg) test at every KV cache type, thread count and depth, in that order
// within each mode, each line carrying its own kv_type, n_threads,
// n_prompt, n_gen and n_depth; the model's own KV type is back after.
// Bad items are refused by flag.
func TestRunLists(t *testing.T) {
	path, err := models.DefaultModelPath()
	require.NoError(t, err)
	m, err := engine.Load(path, "")
	require.NoError(t, err)
	told := map[string]int{}
	o := Options{Prompts: []int{4, 0, 8}, Gens: []int{2}, PG: [][2]int{{4, 2}}, Depths: []int{0, 6}, Reps: 1, Threads: []int{1, 2},
		KVTypes: []ops.DType{ops.F16, ops.F32}, Modes: []string{"dense", "oracle"}, Progress: func(what string) { told[what]++ }}
	rep, err := Run(m, o)
	require.NoError(t, err)
	assert.Equal(t, ops.F32, m.KVType, "the model's KV type is back")
	// Progress hears of every run, the warm-up and one repetition of each
	// of the 2 modes' 4 tests at 2 depths, 2 thread counts and 2 KV types.
	assert.Equal(t, 2*4*2*2*2*2, o.Runs())
	assert.Len(t, told, 2*4*2*2*2)
	for what, n := range told {
		assert.Equal(t, 2, n, what)
	}
	assert.Contains(t, told, "oracle pp4+tg2 @ d6 -t 1, KV f16")
	type line struct {
		mode, test, kv       string
		threads, p, g, depth int
	}
	var got, want []line
	for _, r := range rep.Results {
		got = append(got, line{r.Mode, r.Test, r.KVType, r.Threads, r.Prompt, r.Gen, r.Depth})
	}
	for _, mode := range []string{"dense", "oracle"} {
		for _, kv := range []string{"f16", "f32"} {
			for _, th := range []int{1, 2} {
				for _, d := range []int{0, 6} {
					suffix := ""
					if d > 0 {
						suffix = " @ d6"
					}
					want = append(want,
						line{mode, "pp4" + suffix, kv, th, 4, 0, d},
						line{mode, "pp8" + suffix, kv, th, 8, 0, d},
						line{mode, "tg2" + suffix, kv, th, 0, 2, d},
						line{mode, "pp4+tg2" + suffix, kv, th, 4, 2, d})
				}
			}
		}
	}
	assert.Equal(t, want, got)
	for _, r := range rep.Results {
		switch {
		case r.Gen > 0 && r.Prompt == 0:
			assert.Greater(t, r.StreamGBps, 0.0, "%s/%s at %d threads", r.Mode, r.Test, r.Threads)
			assert.Greater(t, r.BytesPerToken, 0.0)
		case r.Gen > 0: // prompt and decode timed together: no decode's bytes or stream
			assert.Zero(t, r.StreamGBps, r.Test)
			assert.Zero(t, r.BytesPerToken, r.Test)
		}
		assert.Len(t, r.TokensPerSec, 1)
	}

	for _, o := range []struct {
		opt  Options
		want string
	}{
		{Options{Prompts: []int{4, -2}, Reps: 1}, "-p -2"},
		{Options{Gens: []int{-1}, Reps: 1}, "-n -1"},
		{Options{Threads: []int{2, 0}, Reps: 1}, "-t 0: want at least 1"},
		{Options{PG: [][2]int{{4, 0}}, Reps: 1}, "--pg 4,0: want a prompt and a decode of at least 1 token each"},
		{Options{Prompts: []int{0}, Gens: []int{0}, Reps: 1}, "-p [0] -n [0] and no --pg: nothing to measure"}, // gave "results": null
	} {
		_, err := Run(m, o.opt)
		require.ErrorContains(t, err, o.want)
	}
}

// --op-times: each line says where its tokens went. The decode lines' calls
// per token are relu-llama.toml's (six blocks, a layer's q, k and v one
// call, each FFN's predictor one), their ops' weight bytes add up to the line's, and the ops' time
// lies inside the timed tokens' and makes most of it.
func TestRunOpTimes(t *testing.T) {
	path, err := models.DefaultModelPath()
	require.NoError(t, err)
	m, err := engine.Load(path, "")
	require.NoError(t, err)
	rep, err := Run(m, Options{Prompts: []int{8}, Gens: []int{4}, Reps: 2, Threads: []int{2}, Modes: []string{"dense", "oracle"}, OpTimes: true})
	require.NoError(t, err)
	// Each sparse_ffn's predictor (dense's, which picks every neuron, too)
	// is timed apart from it.
	perBlock := map[string]float64{"rms_norm": 2, "matmul": 2, "rope": 2, "attention": 1, "add": 2, "sparse_ffn": 1, "predictor": 1}
	want := map[string]float64{"embedding": 1, "rms_norm": 1, "output": 1}
	for op, n := range perBlock {
		want[op] += 6 * n
	}
	require.Len(t, rep.Results, 4)
	for _, r := range rep.Results {
		what := r.Mode + "/" + r.Test
		require.NotEmpty(t, r.Ops, what)
		calls := map[string]float64{}
		var ms, bytes, share float64
		for k, o := range r.Ops {
			calls[o.Op] = o.Calls
			ms, bytes, share = ms+o.Ms, bytes+o.Bytes, share+o.Share
			if k > 0 {
				assert.LessOrEqual(t, o.Ms, r.Ops[k-1].Ms, "%s: the slowest op first", what)
			}
		}
		assert.InDelta(t, 1, share, 1e-9, what)
		// The timed span per token, from the samples (each n tokens).
		n := float64(r.Gen)
		if r.Gen == 0 {
			n = float64(r.Prompt)
		}
		var wall float64
		for _, tps := range r.TokensPerSec {
			wall += n / tps
		}
		wall = wall * 1e3 / (n * float64(len(r.TokensPerSec)))
		assert.LessOrEqual(t, ms, wall, "%s: the ops ran inside the timed tokens", what)
		assert.Greater(t, ms, 0.3*wall, "%s: the ops are most of a token's time", what)
		if r.Gen == 0 {
			assert.InDelta(t, 1.0/8, calls["output"], 1e-9, "%s: one output call a prompt", what)
			assert.Zero(t, bytes, "%s: no weight rates for prefill", what)
			continue
		}
		assert.Equal(t, want, calls, what)
		assert.InDelta(t, r.BytesPerToken, bytes, 1e-6*r.BytesPerToken, "%s: the ops' bytes are the line's", what)
		for _, o := range r.Ops {
			if o.Bytes > 0 {
				assert.InDelta(t, o.Bytes/(o.Ms/1e3)/1e9, o.GBPerSec, 1e-9*o.GBPerSec, "%s %s", what, o.Op)
			}
		}
	}
	plain, err := Run(m, Options{Gens: []int{2}, Reps: 1, Threads: []int{2}, Modes: []string{"dense"}})
	require.NoError(t, err)
	assert.Nil(t, plain.Results[0].Ops, "no op times unless asked")
}

// A model whose output is tied to its token embeddings (Falcon's layout,
// the falcon-relu fixture converted) reads the table whole for the output
// and one row of it for the embedding: BytesPerToken counts both, against
// the file's own tensor list.
func TestBytesPerTokenTiedOutput(t *testing.T) {
	out := filepath.Join(t.TempDir(), "falcon.gguf")
	require.NoError(t, convert.Convert(fixtures.Path(t, "arch", "falcon-relu"), out, convert.Options{Type: ops.F16, Logf: t.Logf}))
	m, err := engine.Load(out, "")
	require.NoError(t, err)
	defer m.Close()
	var want, embd float64
	for _, x := range m.File.Tensors {
		require.NotEqual(t, "output.weight", x.Name, "the fixture's output is tied")
		if strings.HasSuffix(x.Name, "fc1.weight") || strings.HasSuffix(x.Name, "fc2.weight") {
			continue
		}
		want += float64(x.Size)
		if x.Name == "token_embd.weight" {
			embd = float64(x.Size) / float64(x.Dims[1])
		}
	}
	require.Positive(t, embd)
	reads := make([]Reads, len(m.Prog.Layers))
	for k := range reads {
		reads[k] = Reads{1, 1, 1}
	}
	assert.InDelta(t, want+embd, BytesPerToken(m.Prog, reads, false), 0.5)
	by := BytesByOp(m.Prog, reads, false)
	assert.InDelta(t, embd, by["embedding"], 1e-9)
	assert.Greater(t, by["output"], 0.0)
}
