package engine

import (
	"os"
	"testing"

	"github.com/pinfer/pinfer/internal/fixtures"
	"github.com/pinfer/pinfer/sample"
	"github.com/stretchr/testify/require"
)

// Prompt lookup drafts tokens and checks them in one pass; the text stays
// greedy decoding's: llama2.c's 200 tokens of stories260K, in fewer passes.
func TestLookupKeepsGreedyText(t *testing.T) {
	m, err := Load(fixtures.Path(t, "stories260K", "stories260K.gguf"), "")
	require.NoError(t, err)
	defer m.Close()
	want, err := os.ReadFile(fixtures.Path(t, "stories260K", "expected_t0_n200.txt"))
	require.NoError(t, err)
	for _, k := range []int{1, 4, 10} {
		res, err := m.Generate(Options{N: 200, Ctx: 512, Threads: 2, Sample: sample.Params{Temp: 0}, Lookup: k})
		require.NoError(t, err)
		require.Equal(t, string(want), res.Text, "lookup %d", k)
		require.Greater(t, res.Accepted, 10, "lookup %d", k)
		require.LessOrEqual(t, res.Accepted, res.Drafted)
		require.Equal(t, 199-res.Accepted, res.Timings.EvalRuns, "lookup %d: a pass per token not drafted right", k)
	}
}

// With a repeat penalty, a short context shifted as it fills, a count that
// ends inside a draft, and sampling, the text is the same as without
// lookup.
func TestLookupMatchesPlainDecoding(t *testing.T) {
	m, err := Load(fixtures.Path(t, "stories260K", "stories260K.gguf"), "")
	require.NoError(t, err)
	defer m.Close()
	for _, c := range []Options{
		{Prompt: "Once upon a time, Lily", N: 97, Ctx: 512, Sample: sample.Params{Temp: 0, RepeatPenalty: 1.3, RepeatLastN: 16}},
		{Prompt: "Once upon a time, Lily", N: 150, Ctx: 40, Sample: sample.Params{Temp: 0}, ContextShift: true, Keep: -1},
		{Prompt: "Once upon a time, Lily", N: -1, Ctx: 60, Sample: sample.Params{Temp: 0}},
		// Sampled: a drafted token counts only when the draw picks it from
		// the logits after the tokens before it, so the draws are the same.
		{Prompt: "Once upon a time, Lily", N: 120, Ctx: 512, Sample: sample.Params{Temp: 0.7, TopK: 40, TopP: 0.95, RepeatPenalty: 1, Seed: 3}},
	} {
		c.Threads = 1
		plain, err := m.Generate(c)
		require.NoError(t, err)
		c.Lookup = 6
		look, err := m.Generate(c)
		require.NoError(t, err)
		require.Equal(t, plain.Tokens, look.Tokens)
		require.Equal(t, plain.StopReason, look.StopReason)
		require.Greater(t, look.Accepted, 0)
	}
}
