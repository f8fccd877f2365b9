package engine

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/pinfer/pinfer/grammar"
	"github.com/pinfer/pinfer/internal/fixtures"
	"github.com/pinfer/pinfer/models"
	"github.com/pinfer/pinfer/ops"
	"github.com/pinfer/pinfer/sample"
	"github.com/stretchr/testify/require"
)

// A session that ran the first half of a prompt and then tokens the prompt
// does not share is saved to a file; a fresh session of another context
// restores it and Generate runs only the prompt's second half: the last
// position's logits are PyTorch's, and so is the greedy continuation. With
// the KV cache in f32 (the tolerance of the model's own PyTorch test) and
// in f16 (its keys and values rounded, as a run that restored nothing
// keeps them: the f16 tolerance of the stories test).
func TestRestoredStateMatchesPyTorch(t *testing.T) {
	ref := loadShakespeareRef(t)
	path, err := models.DefaultModelPath() // the checkpoint's f16 weights as they are
	require.NoError(t, err)
	m, err := Load(path, "")
	require.NoError(t, err)
	defer m.Close()
	defer func() { m.KVType = ops.F32 }()
	pool := ops.NewPool(2)
	defer pool.Close()
	file := filepath.Join(t.TempDir(), "state.bin")
	for _, kv := range []ops.DType{ops.F32, ops.F16} {
		t.Run(kv.String(), func(t *testing.T) {
			m.KVType = kv
			tol := map[ops.DType]float64{ops.F32: 2e-3, ops.F16: 2e-2}[kv]
			for _, p := range ref.Prompts {
				half := max(1, len(p.IDs)/2)
				saver := m.NewSession(96, pool)
				_, err := saver.Forward(append(append([]int(nil), p.IDs[:half]...), 5, 6, 7), false)
				require.NoError(t, err)
				written, err := saver.SaveStateFile(file)
				require.NoError(t, err)

				sess := m.NewSession(128, pool)
				n, read, err := sess.LoadStateFile(file)
				require.NoError(t, err)
				require.Equal(t, half+3, n)
				require.Equal(t, written, read)

				res, err := m.Generate(Options{Prompt: p.Text, N: len(p.GreedyIDs), Session: sess, Sample: sample.Params{Temp: 0}})
				require.NoError(t, err)
				require.Equal(t, p.IDs, res.PromptTokens)
				require.Equal(t, half, res.Timings.CacheN, "prompt %q: the restored positions it shares", p.Text)
				require.Equal(t, len(p.IDs)-half, res.Timings.PromptN)
				var worst float64
				for i, l := range p.LastLogits {
					worst = math.Max(worst, math.Abs(float64(l-res.LastLogits[i])))
				}
				t.Logf("prompt %q: %d of %d tokens restored, max |logit - PyTorch| %.2g", p.Text, half, len(p.IDs), worst)
				require.Less(t, worst, tol, "prompt %q", p.Text)
				// f16 keys and values move the logits by up to tol: the
				// text is PyTorch's up to the first step whose two best
				// logits are closer than that could keep apart (one of
				// them, "The king is dead"'s last at 0.004).
				upto := len(p.GreedyIDs)
				if kv == ops.F16 {
					for i, d := range p.Margins {
						if d < 2*tol {
							upto = i
							break
						}
					}
				}
				require.Equal(t, p.GreedyIDs[:upto], res.Tokens[:upto], "prompt %q", p.Text)
			}
		})
	}
}

// A kept session, after a text drafted by prompt lookup, holds the prompt
// and the text's tokens (not a draft the text did not get to): saved after
// 100 of llama.cpp's greedy tokens of stories260K and restored in a fresh
// session, it goes on to the reference's 200.
func TestLookupSessionSavesTheText(t *testing.T) {
	m, err := Load(fixtures.Path(t, "stories260K", "stories260K.gguf"), "")
	require.NoError(t, err)
	defer m.Close()
	want, err := os.ReadFile(fixtures.Path(t, "stories260K", "expected_t0_n200.txt"))
	require.NoError(t, err)
	pool := ops.NewPool(2)
	defer pool.Close()
	sess := m.NewSession(512, pool)
	first, err := m.Generate(Options{N: 100, Session: sess, Sample: sample.Params{Temp: 0}, Lookup: 8})
	require.NoError(t, err)
	require.Greater(t, first.Drafted, first.Accepted, "some draft was cut short")
	require.Equal(t, append([]int{1}, first.Tokens[:99]...), sess.Tokens())
	file := filepath.Join(t.TempDir(), "s.bin")
	_, err = sess.SaveStateFile(file)
	require.NoError(t, err)

	fresh := m.NewSession(300, pool)
	n, _, err := fresh.LoadStateFile(file)
	require.NoError(t, err)
	require.Equal(t, 100, n)
	second, err := m.Generate(Options{PromptIDs: fresh.Tokens(), N: 101, Session: fresh, Sample: sample.Params{Temp: 0}})
	require.NoError(t, err)
	require.Equal(t, 99, second.Timings.CacheN)
	require.Equal(t, first.Tokens[99], second.Tokens[0])
	require.Equal(t, string(want), m.Tok.Decode(append(first.Tokens, second.Tokens[1:]...)))
}

// A text that ends (the grammar matched, so only the end of text may
// follow) while a draft is still ahead leaves the session holding the
// text's tokens only: what a run without lookup leaves, and what a saved
// state then holds.
func TestLookupEndLeavesNoDraft(t *testing.T) {
	m, err := Load(fixtures.Path(t, "stories260K", "stories260K.gguf"), "")
	require.NoError(t, err)
	defer m.Close()
	pool := ops.NewPool(2)
	defer pool.Close()
	// The prompt's first sentence drafts the rest of it after " there".
	prompt := "Once upon a time, there was a little girl named Lily. Once upon a time,"
	g, err := grammar.Parse(`root ::= " there was"`)
	require.NoError(t, err)
	var held [2][]int
	for k, lookup := range []int{0, 8} {
		sess := m.NewSession(512, pool)
		res, err := m.Generate(Options{Prompt: prompt, N: 50, Session: sess, Sample: sample.Params{Temp: 0}, Grammar: g, Lookup: lookup})
		require.NoError(t, err)
		require.Equal(t, " there was", res.Text)
		require.Equal(t, "eos", res.StopReason)
		if lookup > 0 {
			require.Greater(t, res.Drafted, res.Accepted+1, "a draft goes past the end")
		}
		held[k] = append([]int(nil), sess.Tokens()...)
		require.Equal(t, append(append([]int(nil), res.PromptTokens...), res.Tokens...), held[k])
	}
	require.Equal(t, held[0], held[1])
}
