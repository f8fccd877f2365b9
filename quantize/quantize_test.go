package quantize_test

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/pinfer/pinfer/convert"
	"github.com/pinfer/pinfer/engine"
	"github.com/pinfer/pinfer/gguf"
	"github.com/pinfer/pinfer/internal/fixtures"
	"github.com/pinfer/pinfer/ops"
	"github.com/pinfer/pinfer/quantize"
	"github.com/pinfer/pinfer/sample"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var (
	converted sync.Map // ops.DType -> path of the Shakespeare checkpoint converted to it
	tmpDir    string
)

func TestMain(m *testing.M) {
	d, err := os.MkdirTemp("", "pinfer-quantize-")
	if err != nil {
		panic(err)
	}
	tmpDir = d
	code := m.Run()
	os.RemoveAll(d)
	os.Exit(code)
}

// shakespeare is the fixture checkpoint converted by `pinfer convert --type
// typ`, once per test run.
func shakespeare(t *testing.T, typ ops.DType) string {
	t.Helper()
	if p, ok := converted.Load(typ); ok {
		return p.(string)
	}
	out := filepath.Join(tmpDir, fmt.Sprintf("shakespeare-%s.gguf", typ))
	require.NoError(t, convert.Convert(fixtures.Path(t, "shakespeare-relu-6m"), out, convert.Options{Type: typ}))
	converted.Store(typ, out)
	return out
}

func open(t *testing.T, path string) *gguf.File {
	t.Helper()
	f, err := gguf.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	return f
}

// llama-quantize's type names in any case, and llama.cpp's file type ids
// (enum llama_ftype in llama.h: ALL_F32 0, MOSTLY_F16 1, MOSTLY_Q4_0 2,
// MOSTLY_Q8_0 7, MOSTLY_BF16 32); anything else is refused with the list.
func TestParseType(t *testing.T) {
	for s, want := range map[string]ops.DType{
		"f32": ops.F32, "F16": ops.F16, "bf16": ops.BF16, "BF16": ops.BF16, "q8_0": ops.Q8_0, "Q8_0": ops.Q8_0, "Q4_0": ops.Q4_0,
		"0": ops.F32, "1": ops.F16, "2": ops.Q4_0, "7": ops.Q8_0, "32": ops.BF16,
	} {
		got, err := quantize.ParseType(s)
		require.NoError(t, err, s)
		assert.Equal(t, want, got, s)
		id, ok := quantize.FileType(got)
		require.True(t, ok)
		if s[0] >= '0' && s[0] <= '9' {
			assert.Equal(t, s, fmt.Sprint(id), "the id names the type back")
		}
	}
	for _, s := range []string{"q4_K_M", "Q4_K", "q5_0", "q4_1", "COPY", "i32", "3", "8", "15", "-1", ""} {
		_, err := quantize.ParseType(s)
		require.Error(t, err, s)
		assert.Contains(t, err.Error(), fmt.Sprintf("%q", s))
		assert.Contains(t, err.Error(), "f32 (0), f16 (1), bf16 (32), q8_0 (7) or q4_0 (2)")
	}
}

// The rule convert and quantize share, case by case: what llama.cpp's
// converter and llama-quantize leave in f32, and the f16 fallback for rows
// that do not fill a block.
func TestTensorType(t *testing.T) {
	for _, c := range []struct {
		name string
		dims []uint64
		want ops.DType
		got  ops.DType
		note bool
	}{
		{"blk.0.attn_norm.weight", []uint64{4096}, ops.Q4_0, ops.F32, false},
		{"blk.0.attn_q.bias", []uint64{4096}, ops.F16, ops.F32, false},
		{"blk.0.ffn_gate_inp.weight", []uint64{4096, 8}, ops.Q8_0, ops.F32, false},
		{"position_embd.weight", []uint64{768, 2050}, ops.Q4_0, ops.F32, false},
		{"token_embd.weight", []uint64{4096, 32000}, ops.Q4_0, ops.Q4_0, false},
		{"output.weight", []uint64{4096, 32000}, ops.Q8_0, ops.Q8_0, false},
		{"blk.3.ffn_down_t.weight", []uint64{4096, 11008}, ops.Q4_0, ops.Q4_0, false},
		{"blk.3.fc1.weight", []uint64{4096, 1024}, ops.Q4_0, ops.Q4_0, false},
		{"blk.3.fc2.weight", []uint64{1024, 11008}, ops.Q8_0, ops.Q8_0, false},
		{"blk.0.ffn_up_exps.weight", []uint64{4096, 14336, 8}, ops.Q4_0, ops.Q4_0, false},
		{"blk.0.ffn_down.weight", []uint64{172, 64}, ops.Q8_0, ops.F16, true},
		{"blk.0.ffn_down.weight", []uint64{172, 64}, ops.BF16, ops.BF16, false},
		{"blk.0.ffn_down.weight", []uint64{172, 64}, ops.F32, ops.F32, false},
	} {
		got, note := quantize.TensorType(c.name, c.dims, c.want)
		assert.Equal(t, c.got, got, "%s %v as %s", c.name, c.dims, c.want)
		assert.Equal(t, c.note, note != "", "%s %v as %s: note %q", c.name, c.dims, c.want, note)
	}
}

// sameFile requires a and b to hold the same metadata (whatever the order)
// and the same tensors in the same order, byte for byte.
func sameFile(t *testing.T, a, b *gguf.File) {
	t.Helper()
	require.Equal(t, a.Magic, b.Magic)
	require.Equal(t, len(a.KVs), len(b.KVs))
	for _, kv := range a.KVs {
		v, ok := b.KV(kv.Key)
		require.True(t, ok, kv.Key)
		require.Equal(t, kv.Value, v, kv.Key)
	}
	require.Equal(t, len(a.Tensors), len(b.Tensors))
	for i := range a.Tensors {
		x, y := &a.Tensors[i], &b.Tensors[i]
		require.Equal(t, x.Name, y.Name)
		require.Equal(t, x.Dims, y.Dims, x.Name)
		require.Equal(t, x.Type, y.Type, x.Name)
		require.Equal(t, a.Data(x), b.Data(y), x.Name)
	}
}

// Quantizing the f16 conversion of a checkpoint whose weights are f16 (so
// that f16 loses nothing) gives the file `convert --type` writes from the
// checkpoint itself: the same tensors, types and bytes, and the same
// metadata (general.file_type the new id, general.quantization_version 2
// for q8_0 and q4_0). Each type runs on another number of threads.
func TestShakespeareSameAsConvert(t *testing.T) {
	f16 := shakespeare(t, ops.F16)
	for i, typ := range []ops.DType{ops.Q8_0, ops.Q4_0, ops.BF16, ops.F32, ops.F16} {
		t.Run(typ.String(), func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "q.gguf")
			plan, err := quantize.File(f16, out, quantize.Options{Type: typ, Threads: []int{1, 3, 2, 0, 4}[i]})
			require.NoError(t, err)
			got, want := open(t, out), open(t, shakespeare(t, typ))
			sameFile(t, want, got)
			id, _ := quantize.FileType(typ)
			ft, err := got.Uint("general.file_type")
			require.NoError(t, err)
			assert.Equal(t, uint64(id), ft)
			qv, err := got.Uint("general.quantization_version")
			if typ == ops.Q8_0 || typ == ops.Q4_0 {
				require.NoError(t, err)
				assert.Equal(t, uint64(2), qv)
			} else {
				require.Error(t, err, "no quantized tensor, no quantization version")
			}
			// The plan says what the file holds.
			require.Len(t, plan, len(got.Tensors))
			for k, p := range plan {
				ti := &got.Tensors[k]
				assert.Equal(t, ti.Name, p.Name)
				assert.Equal(t, ti.Type, p.To, p.Name)
				assert.Equal(t, ti.Size, p.ToBytes, p.Name)
				assert.Equal(t, ops.F16 == typ || len(ti.Dims) == 1, p.Copied(), p.Name)
			}
		})
	}
}

type shakespeareRef struct {
	Prompts []struct {
		Text       string    `json:"text"`
		IDs        []int     `json:"ids"`
		GreedyIDs  []int     `json:"greedy_ids"`
		LastLogits []float32 `json:"last_logits"`
		Margins    []float64 `json:"greedy_top2_margins"`
	} `json:"prompts"`
}

// klDiv is KL(p‖q) in nats between the softmaxes of two logit vectors.
func klDiv(p, q []float32) float64 {
	lse := func(x []float32) float64 {
		m := math.Inf(-1)
		for _, v := range x {
			m = math.Max(m, float64(v))
		}
		var s float64
		for _, v := range x {
			s += math.Exp(float64(v) - m)
		}
		return m + math.Log(s)
	}
	a, b := lse(p), lse(q)
	var kl float64
	for i := range p {
		lp, lq := float64(p[i])-a, float64(q[i])-b
		kl += math.Exp(lp) * (lp - lq)
	}
	return kl
}

// rank is how many logits are above token's.
func rank(logits []float32, token int) int {
	n := 0
	for _, l := range logits {
		if l > logits[token] {
			n++
		}
	}
	return n
}

// The quantized files against PyTorch's fp32 outputs of the checkpoint.
// q8_0 is held to what the repository holds `convert --type q8_0` to
// (engine's TestShakespeareQ8MatchesF32): PyTorch's greedy ids for the
// first 16 tokens of every prompt; and at the prompt's last position
// PyTorch's next token is the q8_0 model's too, with KL(PyTorch‖q8_0)
// under 0.01 nats (measured: 0.002 at most). Nothing in the repository
// holds q4_0 to PyTorch (its convert test bounds each block's error): on
// this 6M-parameter model with rows of 256, 4-bit weights move the logits
// by up to 4.6 (of 17) and the greedy text leaves PyTorch's within 0-5
// tokens, so q4_0 is held to keeping PyTorch's next token among its top 3
// and KL(PyTorch‖q4_0) under 1.5 nats at each prompt's last position
// (measured: rank 2 and 0.84 at worst, 0.26 on average; wrong weights, a
// swapped nibble or scale, give several nats).
func TestShakespeareQuantizedMatchesPyTorch(t *testing.T) {
	var ref shakespeareRef
	b, err := os.ReadFile(fixtures.Path(t, "shakespeare-relu-6m", "reference.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &ref))
	require.Len(t, ref.Prompts, 4)
	for _, typ := range []ops.DType{ops.Q8_0, ops.Q4_0} {
		t.Run(typ.String(), func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "q.gguf")
			_, err := quantize.File(shakespeare(t, ops.F16), out, quantize.Options{Type: typ})
			require.NoError(t, err)
			m, err := engine.Load(out, "")
			require.NoError(t, err)
			defer m.Close()
			var sum float64
			for _, p := range ref.Prompts {
				n := 16
				if typ == ops.Q4_0 {
					n = 1
				}
				res, err := m.Generate(engine.Options{Prompt: p.Text, N: n, Threads: 2, Sample: sample.Params{Temp: 0}})
				require.NoError(t, err)
				require.Equal(t, p.IDs, res.PromptTokens, "prompt %q", p.Text)
				kl, r := klDiv(p.LastLogits, res.LastLogits), rank(res.LastLogits, p.GreedyIDs[0])
				sum += kl
				t.Logf("%q: KL %.4f, PyTorch's next token ranks %d", p.Text, kl, r)
				if typ == ops.Q8_0 {
					require.Equal(t, p.GreedyIDs[:16], res.Tokens, "prompt %q", p.Text)
					require.Zero(t, r, "prompt %q", p.Text)
					require.Less(t, kl, 0.01, "prompt %q", p.Text)
				} else {
					require.Less(t, r, 3, "prompt %q", p.Text)
					require.Less(t, kl, 1.5, "prompt %q", p.Text)
				}
			}
			t.Logf("mean KL %.4f", sum/4)
		})
	}
}

// llama.cpp's own f32 GGUF of stories260K quantized to q8_0 (ffn_down, rows
// of 172, falls back to f16) against llama.cpp's f32 run of it. Fed the
// reference's tokens, every step's top-5 logits stay within 0.4 of
// llama.cpp's (measured: 0.25; the logits span about -8 to 17, and q8_0
// moves each weight by up to 1/254 of its block's largest). A greedy pick
// may then differ from llama.cpp's only where its top two logits are within
// 2 × 0.4; run free, the greedy text is llama.cpp's exactly up to the first
// step where the q8_0 model's pick differs, which must be such a near tie.
func TestStories260KQ8(t *testing.T) {
	const tol = 0.4
	out := filepath.Join(t.TempDir(), "stories-q8_0.gguf")
	plan, err := quantize.File(fixtures.Path(t, "stories260K", "stories260K.gguf"), out, quantize.Options{Type: ops.Q8_0})
	require.NoError(t, err)
	f := open(t, out)
	for _, p := range plan {
		ti, _ := f.Tensor(p.Name)
		switch {
		case len(ti.Dims) == 1:
			assert.Equal(t, ops.F32, ti.Type, ti.Name)
		case ti.Dims[0]%32 != 0:
			assert.Equal(t, ops.F16, ti.Type, ti.Name)
			assert.NotEmpty(t, p.Note, ti.Name)
		default:
			assert.Equal(t, ops.Q8_0, ti.Type, ti.Name)
		}
	}
	steps := fixtures.StoriesTrace(t, 200)[:200]
	want, err := os.ReadFile(fixtures.Path(t, "stories260K", "expected_t0_n200.txt"))
	require.NoError(t, err)

	m, err := engine.Load(out, "")
	require.NoError(t, err)
	defer m.Close()
	sess := m.NewSession(512, nil)
	firstDiff := len(steps)
	var worst float64
	for i, st := range steps {
		l, err := sess.Forward([]int{st.InputToken}, false)
		require.NoError(t, err)
		for k, r := range st.Top5 {
			d := math.Abs(r[1] - float64(l.Data[int(r[0])]))
			worst = max(worst, d)
			require.Less(t, d, tol, "step %d rank %d", i, k)
		}
		if best := argmax(l.Data); best != st.NextToken {
			margin := st.Top5[0][1] - st.Top5[1][1]
			require.Less(t, margin, 2*tol, "step %d: picks %d over llama.cpp's %d", i, best, st.NextToken)
			firstDiff = min(firstDiff, i)
		}
	}
	t.Logf("largest top-5 logit difference %.3f; first pick that differs at step %d", worst, firstDiff)

	res, err := m.Generate(engine.Options{N: 200, Ctx: 512, Threads: 2, Sample: sample.Params{Temp: 0}})
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(res.Tokens), firstDiff)
	for i := 0; i < firstDiff; i++ {
		require.Equal(t, steps[i].NextToken, res.Tokens[i], "step %d", i)
	}
	prefix := m.Tok.Decode(res.Tokens[:firstDiff])
	require.True(t, strings.HasPrefix(string(want), prefix), "%q is not the start of llama.cpp's text", prefix)
	if firstDiff == len(steps) {
		require.Equal(t, string(want), res.Text)
	}
}

func argmax(x []float32) int {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return best
}
