package engine

import (
	"testing"

	"github.com/pinfer/pinfer/internal/fixtures"
	"github.com/pinfer/pinfer/ops"
	"github.com/pinfer/pinfer/sample"
	"github.com/stretchr/testify/require"
)

// A quantized copy of the model drafts for it (the usual use of llama.cpp's
// -md): the text stays PyTorch's greedy text, in fewer passes.
func TestDraftModelKeepsPyTorchGreedy(t *testing.T) {
	m, err := Load(shakespeareGGUF(t, ops.F32), "")
	require.NoError(t, err)
	defer m.Close()
	pool := ops.NewPool(2)
	defer pool.Close()
	for _, typ := range []ops.DType{ops.Q8_0, ops.Q4_0} {
		d, err := Load(shakespeareGGUF(t, typ), "")
		require.NoError(t, err)
		defer d.Close()
		for _, pmin := range []float64{0, DefaultDraftPMin} {
			// One draft for all the prompts: its cache follows each text.
			dr, err := m.NewDraft(d, 512, pool, nil, pmin)
			require.NoError(t, err)
			for _, p := range loadShakespeareRef(t).Prompts {
				res, err := m.Generate(Options{PromptIDs: p.IDs, N: len(p.GreedyIDs), Pool: pool, Sample: sample.Params{Temp: 0}, Draft: dr, DraftMax: 6})
				require.NoError(t, err)
				require.Equal(t, p.GreedyIDs, res.Tokens, "%s draft, p-min %g, prompt %q", typ, pmin, p.Text)
				require.Greater(t, res.Accepted, len(p.GreedyIDs)/3, "%s draft, p-min %g: %d of %d drafted", typ, pmin, res.Accepted, res.Drafted)
				require.LessOrEqual(t, res.Accepted, res.Drafted)
				require.Equal(t, len(p.GreedyIDs)-1-res.Accepted, res.Timings.EvalRuns, "a pass per token not drafted right")
			}
		}
	}
}

// Sampled, shifted and penalized text is the same with a draft as without:
// a drafted token counts only when the draw picks it from the model's own
// logits after the tokens before it.
func TestDraftModelMatchesPlainDecoding(t *testing.T) {
	m, err := Load(shakespeareGGUF(t, ops.F32), "")
	require.NoError(t, err)
	defer m.Close()
	d, err := Load(shakespeareGGUF(t, ops.Q4_0), "")
	require.NoError(t, err)
	defer d.Close()
	pool := ops.NewPool(1)
	defer pool.Close()
	for _, c := range []Options{
		{Prompt: "ROMEO:", N: 97, Ctx: 256, Sample: sample.Params{Temp: 0, RepeatPenalty: 1.3, RepeatLastN: 16}},
		{Prompt: "ROMEO:", N: 150, Ctx: 40, Sample: sample.Params{Temp: 0}, ContextShift: true, Keep: -1},
		{Prompt: "ROMEO:", N: -1, Ctx: 60, Sample: sample.Params{Temp: 0}},
		{Prompt: "ROMEO:", N: 120, Ctx: 256, Sample: sample.Params{Temp: 0.7, TopK: 40, TopP: 0.95, RepeatPenalty: 1, Seed: 3}},
	} {
		c.Pool = pool
		plain, err := m.Generate(c)
		require.NoError(t, err)
		c.Draft, err = m.NewDraft(d, m.Context(c.Ctx), pool, nil, 0.5)
		require.NoError(t, err)
		spec, err := m.Generate(c)
		require.NoError(t, err)
		require.Equal(t, plain.Tokens, spec.Tokens)
		require.Equal(t, plain.StopReason, spec.StopReason)
		require.Greater(t, spec.Accepted, 0)
	}
}

// A draft of another vocabulary is refused, naming both files, as is
// drafting two ways at once.
func TestDraftModelRefused(t *testing.T) {
	m, err := Load(shakespeareGGUF(t, ops.F32), "")
	require.NoError(t, err)
	defer m.Close()
	stories, err := Load(fixtures.Path(t, "stories260K", "stories260K.gguf"), "")
	require.NoError(t, err)
	defer stories.Close()
	pool := ops.NewPool(1)
	defer pool.Close()
	_, err = m.NewDraft(stories, 256, pool, nil, 0.75)
	require.ErrorContains(t, err, "a vocabulary of 512 tokens, where "+m.Path+" has 1024")
	_, err = m.NewDraft(m, 256, pool, nil, 1.5)
	require.ErrorContains(t, err, "p-min 1.5")
	dr, err := m.NewDraft(m, 256, pool, nil, 0.75)
	require.NoError(t, err)
	_, err = m.Generate(Options{Prompt: "ROMEO:", N: 4, Pool: pool, Draft: dr, Lookup: 3})
	require.ErrorContains(t, err, "use one of them")
}
