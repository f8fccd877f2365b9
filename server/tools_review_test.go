package server

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// streamed feeds a reply to a parser a byte at a time, as a stream, and
// returns the content and each call's name and arguments the deltas add
// up to.
func streamed(hermes bool, text string) (content string, names, args map[int]string) {
	p := newToolParser(&toolPlan{hermes: hermes})
	names, args = map[int]string{}, map[int]string{}
	feed := func(s string, final bool) {
		for _, d := range p.deltas(s, final) {
			if d.Content != nil {
				content += *d.Content
			}
			for _, tc := range d.ToolCalls {
				names[*tc.Index] += tc.Function.Name
				if tc.Function.Arguments != nil {
					args[*tc.Index] += *tc.Function.Arguments
				}
			}
		}
	}
	for i := range len(text) {
		feed(text[i:i+1], false)
	}
	feed("", true)
	return content, names, args
}

// A lone surrogate escape in a string (a high half not followed by a low
// one) is U+FFFD, as encoding/json reads it, and the string goes on: the
// streamed arguments are the JSON text of the arguments, the same as the
// whole reply's, not the rest of the reply after them.
func TestToolStreamLoneSurrogate(t *testing.T) {
	for _, c := range []struct{ text, args string }{
		{`{"tool_calls": [{"name": "f", "arguments": {"a": "\ud83d"}}]}`, `{"a":"\ud83d"}`},
		{`{"tool_calls": [{"name": "f", "arguments": {"a": "\ud83dxy", "b": 1}}]}`, `{"a":"\ud83dxy","b":1}`},
		{"<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": \"\\udc00\"}}\n</tool_call>", `{"a":"\udc00"}`},
		// A whole pair still waits for its low half.
		{`{"tool_calls": [{"name": "f", "arguments": {"a": "\ud83d\ude00"}}]}`, `{"a":"\ud83d\ude00"}`},
	} {
		hermes := c.text[0] == '<'
		_, names, args := streamed(hermes, c.text)
		require.Equal(t, map[int]string{0: "f"}, names, c.text)
		require.Equal(t, map[int]string{0: c.args}, args, c.text)
		m, fin := newToolParser(&toolPlan{hermes: hermes}).message(c.text, "stop")
		require.Equal(t, "tool_calls", fin)
		require.Len(t, m.ToolCalls, 1)
		require.Equal(t, c.args, *m.ToolCalls[0].Function.Arguments)
	}
	// A name with a lone half reads as encoding/json reads it.
	p := newToolParser(&toolPlan{})
	p.text.WriteString(`{"tool_calls": [{"name": "f\ud83dg", "arguments": {}}]}`)
	_, calls, ok := p.parse(false)
	require.True(t, ok)
	require.Equal(t, "f\uFFFDg", calls[0].name)
}

// A call whose arguments are not JSON (a misspelt literal) is no call:
// OpenAI's clients json-parse tool_calls[].function.arguments. The reply
// is its text, as llama-server answers a reply its parser cannot read.
func TestToolMalformedArguments(t *testing.T) {
	for _, text := range []string{
		`{"tool_calls": [{"name": "f", "arguments": {"a": tru}}]}`,
		`{"tool_calls": [{"name": "f", "arguments": {"a": 1-2}}]}`,
		"<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": +1}}\n</tool_call>",
	} {
		m, fin := newToolParser(&toolPlan{hermes: text[0] == '<'}).message(text, "stop")
		require.Empty(t, m.ToolCalls, text)
		require.NotNil(t, m.Content)
		require.Equal(t, text, *m.Content)
		require.Equal(t, "stop", fin)
		o := newToolParser(&toolPlan{hermes: text[0] == '<'}).ollamaMessage(text)
		require.Empty(t, o.ToolCalls)
		require.Equal(t, text, o.Content)
	}
}

// A reply that is not the format at all is its text when streamed too, as
// the whole reply's message gives it: the stream does not drop it.
func TestToolStreamUnparsedText(t *testing.T) {
	for _, c := range []struct {
		hermes bool
		text   string
	}{
		{false, "plain words"},
		{false, `["not", "an object"]`},
		{true, "Sure.\n<tool_call>\nnot JSON\n</tool_call>"},
	} {
		content, names, _ := streamed(c.hermes, c.text)
		require.Empty(t, names, c.text)
		require.Equal(t, c.text, content)
		m, _ := newToolParser(&toolPlan{hermes: c.hermes}).message(c.text, "stop")
		require.Equal(t, c.text, *m.Content)
	}
}
