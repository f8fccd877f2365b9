package sample

import (
	"math"
	"sort"
	"testing"

	"github.com/pinfer/pinfer/grammar"

	"github.com/stretchr/testify/require"
)

var logits = []float32{1.0, 3.0, 2.5, -1.0, 0.5}

func draw(t *testing.T, p Params, n int) []int {
	s := New(p)
	counts := make([]int, len(logits))
	for i := 0; i < n; i++ {
		counts[s.Sample(logits)]++
	}
	return counts
}

func TestGreedyIsArgmax(t *testing.T) {
	require.Equal(t, 1, New(Params{Temp: 0}).Sample(logits))
}

// At temperature T with no filters, frequencies follow softmax(logits/T).
func TestTemperatureDistribution(t *testing.T) {
	const n = 200000
	for _, temp := range []float64{0.5, 1, 2} {
		counts := draw(t, Params{Temp: temp, TopP: 1, Seed: 7}, n)
		var z float64
		for _, l := range logits {
			z += math.Exp(float64(l) / temp)
		}
		for i, l := range logits {
			p := math.Exp(float64(l)/temp) / z
			sd := math.Sqrt(p * (1 - p) / n)
			require.InDelta(t, p, float64(counts[i])/n, 5*sd+1e-4, "temp %v id %d", temp, i)
		}
	}
}

func TestFilters(t *testing.T) {
	// top-k 2 keeps ids 1 and 2 only.
	c := draw(t, Params{Temp: 1, TopK: 2, Seed: 1}, 5000)
	require.Zero(t, c[0]+c[3]+c[4])
	require.NotZero(t, c[1])
	require.NotZero(t, c[2])
	// Probabilities at T=1: id1 .54, id2 .33, id0 .07, ...: top-p 0.7 keeps ids 1 and 2.
	c = draw(t, Params{Temp: 1, TopP: 0.7, Seed: 1}, 5000)
	require.Zero(t, c[0]+c[3]+c[4])
	// min-p 0.5: keep p >= 0.5 * p(best): exp(2.5-3)=0.61 passes, exp(1-3)=0.14 does not.
	c = draw(t, Params{Temp: 1, MinP: 0.5, Seed: 1}, 5000)
	require.Zero(t, c[0]+c[3]+c[4])
	require.NotZero(t, c[2])
}

func TestRepeatPenalty(t *testing.T) {
	// 3.0/1.5 = 2.0 falls below 2.5, so greedy moves from id 1 to id 2.
	s := New(Params{Temp: 0, RepeatPenalty: 1.5, RepeatLastN: 4})
	s.Accept(1)
	require.Equal(t, 2, s.Sample(logits))
	// Once id 1 leaves the window of the last 4 tokens it is free again.
	for _, id := range []int{3, 3, 4, 4} {
		s.Accept(id)
	}
	require.Equal(t, 1, s.Sample(logits))
}

func TestSeedReproducible(t *testing.T) {
	a, b, c := New(Params{Temp: 1, Seed: 42}), New(Params{Temp: 1, Seed: 42}), New(Params{Temp: 1, Seed: 43})
	same, diff := true, false
	for i := 0; i < 100; i++ {
		x, y, z := a.Sample(logits), b.Sample(logits), c.Sample(logits)
		same = same && x == y
		diff = diff || x != z
	}
	require.True(t, same)
	require.True(t, diff)
}

// The heap selection picks what a full sort picks, ties by lower id.
func TestTopKMatchesSort(t *testing.T) {
	for _, k := range []int{1, 2, 5, 17} {
		c := make([]cand, 100)
		for i := range c {
			c[i] = cand{i, float64((i * 37) % 23)}
		}
		full := append([]cand(nil), c...)
		sort.Slice(full, func(i, j int) bool { return better(full[i], full[j]) })
		require.Equal(t, full[:k], topK(c, k))
	}
}

// As llama.cpp and ollama define repeat_last_n: 0 turns the penalty off,
// -1 makes it see every token so far.
func TestRepeatLastNOffAndAll(t *testing.T) {
	off := New(Params{Temp: 0, RepeatPenalty: 1.5, RepeatLastN: 0})
	off.Accept(1)
	require.Equal(t, 1, off.Sample(logits))
	all := New(Params{Temp: 0, RepeatPenalty: 1.5, RepeatLastN: -1})
	all.Accept(1)
	for range 1000 {
		all.Accept(3)
	}
	require.Equal(t, 2, all.Sample(logits))
}

func TestCheck(t *testing.T) {
	require.NoError(t, Defaults().Check())
	ok := Params{Temp: 0, TopK: 0, TopP: 1, MinP: 0, RepeatPenalty: 1, RepeatLastN: -1}
	require.NoError(t, ok.Check())
	for name, mod := range map[string]func(*Params){
		"temperature":    func(p *Params) { p.Temp = -0.5 },
		"top_k":          func(p *Params) { p.TopK = -1 },
		"top_p":          func(p *Params) { p.TopP = 0 },
		"min_p":          func(p *Params) { p.MinP = 1.5 },
		"repeat_penalty": func(p *Params) { p.RepeatPenalty = 0 },
		"repeat_last_n":  func(p *Params) { p.RepeatLastN = -2 },
	} {
		p := ok
		mod(&p)
		var pe *ParamError
		require.ErrorAs(t, p.Check(), &pe, name)
		require.Equal(t, name, pe.Name)
	}
	nan := ok
	nan.TopP = math.NaN()
	require.Error(t, nan.Check())
}

// Under a grammar, Pick draws only allowed tokens, greedy takes the best
// allowed one, an end token comes once the grammar is matched, and a
// grammar that needs a character no token writes is an error.
func TestPickUnderGrammar(t *testing.T) {
	pieces := [][]byte{nil, []byte("a"), []byte("b"), []byte("ab"), []byte("c")}
	v := grammar.NewVocab(pieces, []int{0})
	g, err := grammar.Parse(`root ::= "a" "b"+`)
	require.NoError(t, err)
	s := New(Params{Temp: 0, TopP: 1, RepeatPenalty: 1})
	s.SetGrammar(g.NewMatcher(v))
	// "c" and the end are the likeliest, then "b"; "ab" and "a" may start.
	logits := []float32{9, 1, 5, 2, 10}
	id, err := s.Pick(logits)
	require.NoError(t, err)
	require.Equal(t, 3, id) // "ab" beats "a"
	id, err = s.Pick(logits)
	require.NoError(t, err)
	require.Equal(t, 0, id) // matched: the end beats "b"
	for seed := range uint64(50) {
		s := New(Params{Temp: 1, TopP: 1, RepeatPenalty: 1, Seed: seed})
		s.SetGrammar(g.NewMatcher(v))
		text := ""
		for {
			id, err := s.Pick(logits)
			require.NoError(t, err)
			if id == 0 {
				break
			}
			text += string(pieces[id])
		}
		require.Regexp(t, `^ab+$`, text)
	}
	g, err = grammar.Parse(`root ::= "a" "d"`)
	require.NoError(t, err)
	s.SetGrammar(g.NewMatcher(v))
	_, err = s.Pick(logits)
	require.NoError(t, err)
	_, err = s.Pick(logits)
	require.ErrorContains(t, err, "the grammar allows no token here")
}
