package engine

import (
	"testing"

	"github.com/pinfer/pinfer/grammar"
	"github.com/pinfer/pinfer/internal/fixtures"
	"github.com/pinfer/pinfer/sample"
	"github.com/stretchr/testify/require"
)

// With an empty prompt the text starts with the first generated token,
// and Generate's stream drops that token's SentencePiece space; the
// grammar's matcher reads the token's text with the space. So the grammar
// matches one text and the caller gets another: `root ::= " Once upon"`
// is satisfied by ▁Once ▁upon, and Result.Text is "Once upon", which the
// grammar refuses. (The server's completions with "prompt": "" take the
// same path, firstPiece.) The text returned must be one the grammar
// matches: feed the matcher what the stream emits (the first token's text
// without the dropped space), or keep the space under a grammar, as
// llama.cpp does (its grammar and its output both have it).
func TestReview3EmptyPromptTextMatchesGrammar(t *testing.T) {
	m, err := Load(fixtures.Path(t, "stories260K", "stories260K.gguf"), "")
	require.NoError(t, err)
	defer m.Close()
	for _, src := range []string{`root ::= " Once upon"`, `root ::= "Once upon"`, `root ::= " "? [A-Z] [a-z]{1,8} (" " [a-z]{1,8}){2}`} {
		g, err := grammar.Parse(src)
		require.NoError(t, err)
		res, err := m.Generate(Options{N: 30, Ctx: 64, Threads: 1, Sample: sample.Params{Temp: 0}, Grammar: g})
		if err != nil {
			continue // refusing a grammar the first token cannot start is fine; a text it does not match is not
		}
		require.Equal(t, "eos", res.StopReason, "%s: %q", src, res.Text)
		require.True(t, g.MatchString(res.Text), "%s: the text returned, %q (tokens %v), is not one the grammar matches", src, res.Text, res.Tokens)
	}
}
