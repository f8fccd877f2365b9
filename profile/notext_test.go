package profile

import (
	"testing"

	"github.com/pinfer/pinfer/engine"
	"github.com/pinfer/pinfer/models"
	"github.com/stretchr/testify/require"
)

// A text that gives BOS alone (or nothing) is refused: stats from it used to
// be written as "1 tokens profiled".
func TestRunRefusesNoText(t *testing.T) {
	path, err := models.DefaultModelPath()
	require.NoError(t, err)
	m, err := engine.Load(path, "")
	require.NoError(t, err)
	defer m.Close()
	for _, tokens := range [][]int{nil, {m.Tok.BOS()}} {
		_, err := RunTokens(m, tokens, Options{Ctx: 8})
		require.ErrorContains(t, err, "no tokens to profile", "%v", tokens)
	}
	_, err = Run(m, "", Options{Ctx: 8})
	require.ErrorContains(t, err, "no tokens to profile")
	s, err := RunTokens(m, []int{m.Tok.BOS(), 5, 6}, Options{Ctx: 8, MaxTokens: 2})
	require.NoError(t, err)
	require.Equal(t, 2, s.Tokens)
}
