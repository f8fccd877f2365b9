package sample

import (
	"math/rand/v2"
	"testing"

	"github.com/pinfer/pinfer/grammar"
	"github.com/stretchr/testify/require"
)

// Greedy's fast path (try the best few tokens one by one) picks what the
// full mask then argmax picks: the best allowed token after the repeat
// penalty, ties to the lower id, whether the winner is among the first
// eight tried or not. And a draw at temperature > 0, with top-k narrowing
// to fewer tokens than are allowed, only ever returns an allowed one.
func TestReview3GreedyFastPathEqualsMask(t *testing.T) {
	pieces := [][]byte{nil, []byte("a"), []byte("b"), []byte("ab"), []byte("c"), []byte("ba"), []byte("x"),
		[]byte("y"), []byte("z"), []byte("bb"), []byte("q"), []byte("w"), []byte("e"), []byte("r"), []byte("t")}
	v := grammar.NewVocab(pieces, []int{0})
	g, err := grammar.Parse(`root ::= ("a" | "b")+ "c"?`)
	require.NoError(t, err)
	r := rand.New(rand.NewPCG(3, 3))
	mask := make([]bool, len(pieces))
	for trial := range 2000 {
		logits := make([]float32, len(pieces))
		for i := range logits {
			logits[i] = float32(r.IntN(5)) // many ties
		}
		p := Params{Temp: 0, TopP: 1, RepeatPenalty: 1, RepeatLastN: 64}
		if trial%2 == 1 {
			p.RepeatPenalty = 1.7
		}
		s := New(p)
		m := g.NewMatcher(v)
		s.SetGrammar(m)
		ref := g.NewMatcher(v) // followed by hand: mask, penalty, argmax
		var recent []int       // every token taken so far: the penalty's window
		for step := range 6 {
			n := ref.Allowed(mask)
			if n == 0 {
				break
			}
			pen := append([]float32(nil), logits...)
			if p.RepeatPenalty != 1 {
				seen := map[int]bool{}
				for _, id := range recent {
					if seen[id] {
						continue
					}
					seen[id] = true
					if pen[id] > 0 {
						pen[id] = float32(float64(pen[id]) / p.RepeatPenalty)
					} else {
						pen[id] = float32(float64(pen[id]) * p.RepeatPenalty)
					}
				}
			}
			want := -1
			for id, ok := range mask {
				if ok && (want < 0 || float64(pen[id]) > float64(pen[want])) {
					want = id
				}
			}
			got, err := s.Pick(logits)
			require.NoError(t, err)
			require.Equal(t, want, got, "trial %d step %d: logits %v recent %v", trial, step, logits, recent)
			if got == 0 {
				break
			}
			require.NoError(t, ref.Accept(got))
			s.Accept(got)
			recent = append(recent, got)
		}
	}
	// Sampled with top-k 2 of many allowed and disallowed tokens: every
	// draw is allowed.
	logits := []float32{0, 1, 1, 1, 9, 1, 9, 9, 9, 1, 9, 9, 9, 9, 9}
	for seed := range uint64(200) {
		s := New(Params{Temp: 1.5, TopK: 2, TopP: 0.9, MinP: 0.01, RepeatPenalty: 1, Seed: seed})
		m := g.NewMatcher(v)
		s.SetGrammar(m)
		ref := g.NewMatcher(v)
		for range 5 {
			ref.Allowed(mask)
			id, err := s.Pick(logits)
			require.NoError(t, err)
			require.True(t, mask[id], "seed %d: token %d (%q) not allowed", seed, id, pieces[id])
			if id == 0 {
				break
			}
			require.NoError(t, ref.Accept(id))
		}
	}
}
