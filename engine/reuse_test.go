package engine

import (
	"testing"

	"github.com/pinfer/pinfer/internal/fixtures"
	"github.com/stretchr/testify/require"
)

// A session that kept another continuation in its cache, told to reuse what
// a new prompt begins with, runs only the rest and gets llama.cpp's logits
// for the whole prompt: the dropped positions leave nothing behind.
func TestSessionReuseMatchesTrace(t *testing.T) {
	m, err := Load(fixtures.Path(t, "stories260K", "stories260K.gguf"), "")
	require.NoError(t, err)
	defer m.Close()
	steps := readTrace(t)
	var inputs []int
	for _, st := range steps[:60] {
		inputs = append(inputs, st.InputToken)
	}

	sess := m.NewSession(512, nil)
	_, err = sess.Forward(inputs[:20], false)
	require.NoError(t, err)
	_, err = sess.Forward([]int{99, 100, 101, 102, 103, 104, 105, 106, 107, 108, 109}, false) // another story
	require.NoError(t, err)
	require.Equal(t, 31, sess.Pos())

	require.Equal(t, 20, sess.Common(inputs[:40]))
	require.Equal(t, 31, sess.Pos(), "Common changes nothing")
	require.Equal(t, 20, sess.Reuse(inputs[:40]))
	require.Equal(t, 20, sess.Pos())
	logits, err := sess.Forward(inputs[20:40], false)
	require.NoError(t, err)
	for k, ref := range steps[39].Top5 {
		require.InDelta(t, ref[1], logits.Data[int(ref[0])], 1e-3, "rank %d", k)
	}

	// The same prompt again: all but its last token are kept, since the
	// last one's logits are what the caller needs.
	require.Equal(t, 39, sess.Reuse(inputs[:40]))
	logits, err = sess.Forward(inputs[39:40], false)
	require.NoError(t, err)
	for k, ref := range steps[39].Top5 {
		require.InDelta(t, ref[1], logits.Data[int(ref[0])], 1e-3, "rank %d", k)
	}
	// Going on from there is decode as usual.
	for i := 40; i < 60; i++ {
		logits, err = sess.Forward(inputs[i:i+1], false)
		require.NoError(t, err)
		for k, ref := range steps[i].Top5 {
			require.InDelta(t, ref[1], logits.Data[int(ref[0])], 1e-3, "step %d rank %d", i, k)
		}
	}

	// A prompt that shares nothing, or a reset, starts over.
	require.Equal(t, 0, sess.Reuse([]int{2, 3}))
	sess.Reset()
	require.Equal(t, 0, sess.Common(inputs[:40]))
}
