package engine

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/pinfer/pinfer/convert"
	"github.com/pinfer/pinfer/internal/fixtures"
	"github.com/pinfer/pinfer/ops"
	"github.com/pinfer/pinfer/ops/avx2"
	"github.com/pinfer/pinfer/sample"
	"github.com/stretchr/testify/require"
)

type shakespeareRef struct {
	Prompts []struct {
		Text       string    `json:"text"`
		IDs        []int     `json:"ids"`
		GreedyIDs  []int     `json:"greedy_ids"`
		GreedyText string    `json:"greedy_text"`
		LastLogits []float32 `json:"last_logits"`
		Margins    []float64 `json:"greedy_top2_margins"`
	} `json:"prompts"`
}

func loadShakespeareRef(t *testing.T) shakespeareRef {
	var ref shakespeareRef
	b, err := os.ReadFile(fixtures.Path(t, "shakespeare-relu-6m", "reference.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &ref))
	require.Len(t, ref.Prompts, 4)
	return ref
}

var (
	convertOnce sync.Map // dtype -> path
	convertDir  string
)

// shakespeareGGUF converts the fixture checkpoint once per type per test run.
func shakespeareGGUF(t *testing.T, typ ops.DType) string {
	if p, ok := convertOnce.Load(typ); ok {
		return p.(string)
	}
	if convertDir == "" {
		d, err := os.MkdirTemp("", "pinfer-test-")
		require.NoError(t, err)
		convertDir = d
	}
	out := filepath.Join(convertDir, fmt.Sprintf("shakespeare-%s.gguf", typ))
	require.NoError(t, convert.Convert(fixtures.Path(t, "shakespeare-relu-6m"), out, convert.Options{Type: typ}))
	convertOnce.Store(typ, out)
	return out
}

func TestMain(m *testing.M) {
	code := m.Run()
	if convertDir != "" {
		os.RemoveAll(convertDir)
	}
	os.Exit(code)
}

// The converted fixture must reproduce PyTorch's fp32 greedy ids and logits.
func TestShakespeareMatchesPyTorch(t *testing.T) {
	ref := loadShakespeareRef(t)
	for _, typ := range []ops.DType{ops.F32, ops.F16} {
		t.Run(typ.String(), func(t *testing.T) {
			m, err := Load(shakespeareGGUF(t, typ), "")
			require.NoError(t, err)
			defer m.Close()
			require.Equal(t, "relu-llama", m.Spec.Name)
			for _, p := range ref.Prompts {
				res, err := m.Generate(Options{Prompt: p.Text, N: len(p.GreedyIDs), Threads: 2, Sample: sample.Params{Temp: 0}})
				require.NoError(t, err)
				require.Equal(t, p.IDs, res.PromptTokens, "prompt %q", p.Text)
				require.Equal(t, p.GreedyIDs, res.Tokens, "prompt %q", p.Text)
				// greedy_text is the continuation decoded on its own, which
				// drops a leading space; the streamed text keeps it, so that
				// prompt + text reads as the whole.
				require.Equal(t, p.GreedyText, m.Tok.Decode(res.Tokens), "prompt %q", p.Text)
				require.Equal(t, strings.TrimPrefix(res.Text, " "), p.GreedyText, "prompt %q", p.Text)
				require.Len(t, res.LastLogits, len(p.LastLogits))
				var worst float64
				for i, l := range p.LastLogits {
					worst = math.Max(worst, math.Abs(float64(l-res.LastLogits[i])))
				}
				require.Less(t, worst, 2e-3, "prompt %q: max |logit - PyTorch|", p.Text)
			}
		})
	}
}

// q8_0 weights may flip a near-tie, but not within the first 16 tokens.
func TestShakespeareQ8MatchesF32(t *testing.T) {
	ref := loadShakespeareRef(t)
	f32, err := Load(shakespeareGGUF(t, ops.F32), "")
	require.NoError(t, err)
	defer f32.Close()
	q8, err := Load(shakespeareGGUF(t, ops.Q8_0), "")
	require.NoError(t, err)
	defer q8.Close()
	for _, p := range ref.Prompts {
		opt := Options{Prompt: p.Text, N: 16, Threads: 2, Sample: sample.Params{Temp: 0}}
		a, err := f32.Generate(opt)
		require.NoError(t, err)
		b, err := q8.Generate(opt)
		require.NoError(t, err)
		for i := range a.Tokens {
			if a.Tokens[i] != b.Tokens[i] {
				t.Fatalf("prompt %q: q8_0 diverges from f32 at token %d (%d vs %d); PyTorch's top-2 margin there is %.5f",
					p.Text, i, b.Tokens[i], a.Tokens[i], p.Margins[i])
			}
		}
	}
}

// q4_0 weights repacked at load (ops.PackAll, where the CPU gains from it)
// give the logits of the rows they came from. The packed kernels add the
// same integer block sums, scaled in another order (the ops package holds
// both to its portable op; they differ by ~5e-8 of a row's terms). Through
// the model a position's logits then agree to ~2e-7 of their largest,
// unless a value that the next layer rounds to q8_0 sat that close to a
// rounding edge and flipped (about one value in 10^5): that position and
// those that attend to it then move by up to ~1.5% (0.2 of 13 in one
// prompt here), enough to change a greedy pick where the top two are close.
func TestShakespeareQ4RepackedMatchesRows(t *testing.T) {
	ref := loadShakespeareRef(t)
	path := shakespeareGGUF(t, ops.Q4_0)
	defer func() { ops.Repack = true }()
	ops.Repack = false
	rows, err := Load(path, "")
	require.NoError(t, err)
	defer rows.Close()
	require.Nil(t, rows.packing)
	ops.Repack = true
	packed, err := Load(path, "")
	require.NoError(t, err)
	defer packed.Close()
	packed.WaitPacked()
	if avx2.PackPays() && ops.Fast {
		require.NotNil(t, packed.packing, "nothing repacked on a CPU where it pays")
	}
	pool := ops.NewPool(3)
	defer pool.Close()
	var rel []float64
	for _, p := range ref.Prompts {
		// Prompts of more than four tokens and of fewer, and a rest (the
		// four-token kernel and the one-token one).
		ids := p.IDs
		a, err := rows.NewSession(64, pool).Forward(ids, true)
		require.NoError(t, err)
		want := append([]float32(nil), a.Data...)
		b, err := packed.NewSession(64, pool).Forward(ids, true)
		require.NoError(t, err)
		V := len(want) / len(ids)
		for pos := range ids {
			var worst, scale float64
			for i := pos * V; i < (pos+1)*V; i++ {
				scale = max(scale, math.Abs(float64(want[i])))
				worst = max(worst, math.Abs(float64(b.Data[i]-want[i])))
			}
			require.Less(t, worst, 5e-2*scale, "prompt %q position %d", p.Text, pos)
			rel = append(rel, worst/scale)
		}
	}
	// A flip moves the positions after it; a fault in the packed path would
	// move them all.
	slices.Sort(rel)
	require.Less(t, rel[len(rel)/2], 1e-6, "the median position's largest difference, of its largest logit")
}
