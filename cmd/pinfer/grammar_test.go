package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/pinfer/pinfer/internal/fixtures"
	"github.com/stretchr/testify/require"
)

// run --grammar: a grammar that allows PyTorch's greedy continuation
// keeps it, token for token; one that does not bends the text to it.
func TestRunGrammar(t *testing.T) {
	var ref reference
	b, err := os.ReadFile(fixtures.Path(t, "shakespeare-relu-6m", "reference.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &ref))
	p := ref.Prompts[1]
	// The greedy text, as run writes it without a grammar.
	out, stderr, code := pinfer(t, "run", "-p", p.Text, "-n", "16", "--temp", "0", "--json")
	require.Zero(t, code, stderr)
	var plain struct {
		Tokens []int  `json:"tokens"`
		Text   string `json:"text"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &plain))
	require.Equal(t, p.GreedyIDs[:16], plain.Tokens)

	file := filepath.Join(t.TempDir(), "g.gbnf")
	require.NoError(t, os.WriteFile(file, []byte("# PyTorch's text, then anything\nroot ::= "+strconv.Quote(plain.Text)+" .*\n"), 0o644))
	out, stderr, code = pinfer(t, "run", "-p", p.Text, "-n", "16", "--temp", "0", "--json", "--grammar-file", file)
	require.Zero(t, code, stderr)
	var res struct {
		Tokens []int  `json:"tokens"`
		Text   string `json:"text"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	require.Equal(t, p.GreedyIDs[:16], res.Tokens)

	out, stderr, code = pinfer(t, "run", "-p", p.Text, "-n", "40", "--seed", "3", "--grammar", `root ::= " " ("yes" | "no") ", my lord" [.!]`)
	require.Zero(t, code, stderr)
	require.Regexp(t, `^`+p.Text+` (yes|no), my lord[.!]$`, out)

	// A JSON Schema (-j, as llama.cpp's): a document of it, as
	// encoding/json reads it, the keys in the schema's order.
	out, stderr, code = pinfer(t, "run", "-p", p.Text, "-n", "400", "--seed", "3", "--json", "-j",
		`{"type":"object","properties":{"mood":{"enum":["merry","sad"]},"armed":{"type":"boolean"}},"required":["mood","armed"],"additionalProperties":false}`)
	require.Zero(t, code, stderr)
	var doc struct {
		Text       string `json:"text"`
		StopReason string `json:"stop_reason"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &doc))
	require.Equal(t, "eos", doc.StopReason, doc.Text)
	var v struct {
		Mood  string `json:"mood"`
		Armed *bool  `json:"armed"`
	}
	dec := json.NewDecoder(strings.NewReader(doc.Text))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&v), doc.Text)
	require.Contains(t, []string{"merry", "sad"}, v.Mood)
	require.NotNil(t, v.Armed)
	require.Less(t, strings.Index(doc.Text, `"mood"`), strings.Index(doc.Text, `"armed"`))
}

func TestRunGrammarErrors(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.gbnf")
	require.NoError(t, os.WriteFile(bad, []byte("root ::= value\nvalue ::= \"a\" (\n"), 0o644))
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--grammar-file", bad}, "--grammar-file " + bad + ": grammar: line 3, column 1: want ) to close the group"},
		{[]string{"--grammar-file", filepath.Join(t.TempDir(), "none.gbnf")}, "--grammar-file: open "},
		{[]string{"--grammar", `root ::= x`}, `--grammar: grammar: line 1, column 10: rule "x" is used but not defined`},
		{[]string{"--grammar", `root ::= "a"`, "--grammar-file", bad}, "--grammar and --grammar-file each give the whole constraint"},
		{[]string{"--grammar", `root ::= "a"`, "-j", `{}`}, "--grammar and --json-schema each give the whole constraint"},
		{[]string{"-j", `{"type":"nonsense"}`}, "--json-schema: json schema: "},
		{[]string{"--json-schema-file", bad}, "--json-schema-file " + bad + ": json schema: "},
	} {
		_, stderr, code := pinfer(t, append([]string{"run", "-p", "x", "-n", "2"}, c.args...)...)
		require.NotZero(t, code)
		require.Contains(t, stderr, c.want)
		require.NotContains(t, strings.TrimSpace(stderr), "\n")
	}
}
