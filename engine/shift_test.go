package engine

import (
	"testing"

	"github.com/pinfer/pinfer/internal/fixtures"
	"github.com/pinfer/pinfer/sample"
	"github.com/stretchr/testify/require"
)

// With context shift, generation runs on past a full context, and each
// token is the one greedy decoding picks from a fresh session given the
// window that llama-cli's shift leaves: the prompt (or its first --keep
// tokens) and the newer half of the rest.
func TestContextShift(t *testing.T) {
	m, err := Load(fixtures.Path(t, "stories260K", "stories260K.gguf"), "")
	require.NoError(t, err)
	defer m.Close()
	const nctx, n = 48, 150
	for _, keep := range []int{-1, 0, 3} {
		res, err := m.Generate(Options{Prompt: "Once upon a time, Lily", N: n, Ctx: nctx, Threads: 1, Sample: sample.Params{Temp: 0}, ContextShift: true, Keep: keep})
		require.NoError(t, err)
		require.Len(t, res.Tokens, n, "keep %d: stopped with %s", keep, res.StopReason)
		require.Greater(t, res.Shifts, 1)

		prompt := res.PromptTokens
		k := len(prompt)
		if keep >= 0 {
			k = 1 + keep // BOS and keep more
		}
		window := append([]int(nil), prompt...)
		shifts := 0
		for i, want := range res.Tokens {
			if len(window) >= nctx+1 {
				drop := (nctx - k) / 2
				window = append(window[:k:k], window[k+drop:]...)
				shifts++
			}
			sess := m.NewSession(nctx, nil)
			logits, err := sess.Forward(window, false)
			require.NoError(t, err)
			got := topK(logits.Data, 1)[0].ID
			require.Equal(t, got, want, "keep %d: token %d (window of %d)", keep, i, len(window))
			window = append(window, want)
		}
		require.Equal(t, shifts, res.Shifts)
	}
}

// A shift that keeps the whole prompt, when the prompt fills the context,
// has nothing to drop: the text stops there, as without a shift, and is
// kept.
func TestContextShiftWithoutRoomStops(t *testing.T) {
	m, err := Load(fixtures.Path(t, "stories260K", "stories260K.gguf"), "")
	require.NoError(t, err)
	defer m.Close()
	prompt := m.Encode("Once upon a time, there was a little girl named Lily. She loved to play outside in the sun.")
	res, err := m.Generate(Options{PromptIDs: prompt, N: 50, Ctx: len(prompt) + 1, Threads: 1, Sample: sample.Params{Temp: 0}, ContextShift: true, Keep: -1})
	require.NoError(t, err)
	require.Equal(t, "context", res.StopReason)
	require.Len(t, res.Tokens, 2)
}
