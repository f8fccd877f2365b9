package engine

import (
	"encoding/json"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/pinfer/pinfer/grammar"
	"github.com/pinfer/pinfer/internal/fixtures"
	"github.com/pinfer/pinfer/models"
	"github.com/pinfer/pinfer/sample"
	"github.com/stretchr/testify/require"
)

// A grammar that allows the text greedy decoding writes anyway changes
// nothing: llama2.c's 200 greedy tokens of stories260K, then, the grammar
// matched, only the end of text may follow.
func TestGrammarKeepsAllowedGreedyText(t *testing.T) {
	m, err := Load(fixtures.Path(t, "stories260K", "stories260K.gguf"), "")
	require.NoError(t, err)
	defer m.Close()
	want, err := os.ReadFile(fixtures.Path(t, "stories260K", "expected_t0_n200.txt"))
	require.NoError(t, err)
	g, err := grammar.Parse("root ::= " + strconv.Quote(string(want)))
	require.NoError(t, err)
	res, err := m.Generate(Options{N: 250, Ctx: 512, Threads: 2, Sample: sample.Params{Temp: 0}, Grammar: g})
	require.NoError(t, err)
	require.Equal(t, string(want), res.Text)
	require.Equal(t, "eos", res.StopReason)
}

// Grammars that the model's own text would not follow: each sample is a
// JSON object of the shape asked for (encoding/json reads it), or matches
// the regular expression that says the same as the grammar (Go's regexp),
// on SentencePiece vocabularies with and without byte tokens' multi-byte
// characters, greedy and sampled.
func TestGrammarConstrainsSamples(t *testing.T) {
	builtin, err := models.DefaultModelPath()
	require.NoError(t, err)
	for _, path := range []string{builtin, fixtures.Path(t, "stories260K", "stories260K.gguf")} {
		m, err := Load(path, "")
		require.NoError(t, err)
		defer m.Close()
		person, err := grammar.Parse(`root ::= "{\"name\": \"" [A-Z] [a-z]{1,8} "\", \"age\": " [1-9] [0-9]? ", \"tags\": [" ( tag ( ", " tag ){0,3} )? "]}"
tag ::= "\"" [a-z]{1,12} "\""`)
		require.NoError(t, err)
		words, err := grammar.Parse(`root ::= ( [a-z]+ " " ){2,5} ( "é" | "→" | "!" )`)
		require.NoError(t, err)
		wordsRe := regexp.MustCompile(`^(?:[a-z]+ ){2,5}(?:é|→|!)$`)
		for seed := range uint64(6) {
			sp := sample.Params{Temp: 0.9, TopK: 40, TopP: 0.95, RepeatPenalty: 1, Seed: seed}
			if seed == 0 {
				sp.Temp = 0
			}
			res, err := m.Generate(Options{Prompt: "Once", N: 120, Ctx: 256, Threads: 2, Sample: sp, Grammar: person})
			require.NoError(t, err)
			require.Equal(t, "eos", res.StopReason, "%s seed %d: %q", path, seed, res.Text)
			var v struct {
				Name string   `json:"name"`
				Age  int      `json:"age"`
				Tags []string `json:"tags"`
			}
			dec := json.NewDecoder(strings.NewReader(res.Text))
			dec.DisallowUnknownFields()
			require.NoError(t, dec.Decode(&v), "%q", res.Text)
			require.Regexp(t, `^[A-Z][a-z]{1,8}$`, v.Name)
			require.True(t, v.Age >= 1 && v.Age <= 99, v.Age)

			res, err = m.Generate(Options{Prompt: "Once", N: 120, Ctx: 256, Threads: 2, Sample: sp, Grammar: words})
			require.NoError(t, err)
			require.Equal(t, "eos", res.StopReason, "%q", res.Text)
			require.Regexp(t, wordsRe, res.Text)
		}
	}
}
