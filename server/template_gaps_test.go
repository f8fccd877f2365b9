package server

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The expected values in this file are what jinja2 3.1.6 renders in the
// environment of transformers' apply_chat_template (ImmutableSandboxedEnvironment,
// trim_blocks, lstrip_blocks, and its tojson: json.dumps(x, ensure_ascii=False,
// indent=indent, separators=separators, sort_keys=False)), given the same
// variables, the request maps' keys in sorted order.

// gapVars are the variables of these tests: messages and tools as a request
// brings them.
func gapVars() map[string]any {
	return map[string]any{
		"messages": conv("user", "hi", "assistant", "yo"),
		"tools": []any{map[string]any{"type": "function", "function": map[string]any{
			"name":        "get_weather",
			"description": "Weather.",
			"parameters": map[string]any{
				"type":       "object",
				"properties": map[string]any{"city": map[string]any{"type": "string"}},
			},
		}}},
	}
}

func renderGap(t *testing.T, src string) (string, error) {
	t.Helper()
	tpl, err := ParseTemplate(src)
	require.NoError(t, err, src)
	return tpl.Render(gapVars())
}

// tojson(indent=N) pretty-prints as Python's json.dumps(x, indent=N): ","
// between items, ": " after keys, each item on its own line.
func TestTemplateTojsonIndent(t *testing.T) {
	for src, want := range map[string]string{
		`{{ {"a": [2, "é", {"y": true, "z": none}], "b": 1, "c": {}, "d": []} | tojson(indent=2) }}`:                                          "{\n  \"a\": [\n    2,\n    \"é\",\n    {\n      \"y\": true,\n      \"z\": null\n    }\n  ],\n  \"b\": 1,\n  \"c\": {},\n  \"d\": []\n}",
		`{{ {"a": [2, "é", {"y": true, "z": none}], "b": 1, "c": {}, "d": []} | tojson(indent=0) }}`:                                          "{\n\"a\": [\n2,\n\"é\",\n{\n\"y\": true,\n\"z\": null\n}\n],\n\"b\": 1,\n\"c\": {},\n\"d\": []\n}",
		`{{ {"a": [2, {"y": true}], "b": 1} | tojson(indent='\t') }}`:                                                                         "{\n\t\"a\": [\n\t\t2,\n\t\t{\n\t\t\t\"y\": true\n\t\t}\n\t],\n\t\"b\": 1\n}",
		`{{ [1, [2, 3], "x"] | tojson(indent=4) }}|{{ [1, 2] | tojson(indent=-1) }}|{{ "s" | tojson(indent=2) }}|{{ [] | tojson(indent=2) }}`: "[\n    1,\n    [\n        2,\n        3\n    ],\n    \"x\"\n]|[\n1,\n2\n]|\"s\"|[]",
		// By position, indent is second, after ensure_ascii, as in transformers' tojson.
		`{{ [1, {"a": 2}] | tojson(false, 2) }}`: "[\n  1,\n  {\n    \"a\": 2\n  }\n]",
		// Without indent (or with none) the separators stay ", " and ": ".
		`{{ [1, {"a": [2]}] | tojson }}|{{ [1, {"a": [2]}] | tojson(indent=none) }}`: `[1, {"a": [2]}]|[1, {"a": [2]}]`,
		// The request's tools, as tool-calling templates print them.
		`{{ tools | tojson(indent=4) }}`: "[\n    {\n        \"function\": {\n            \"description\": \"Weather.\",\n            \"name\": \"get_weather\",\n            \"parameters\": {\n                \"properties\": {\n                    \"city\": {\n                        \"type\": \"string\"\n                    }\n                },\n                \"type\": \"object\"\n            }\n        },\n        \"type\": \"function\"\n    }\n]",
	} {
		got, err := renderGap(t, src)
		require.NoError(t, err, src)
		require.Equal(t, want, got, src)
	}

	for src, msg := range map[string]string{
		`{{ [1] | tojson(indent=1.5) }}`: "chat template: tojson: indent must be an integer or a string, not a number",
		// Each line's indent counts against the output's limit before it is written.
		`{{ range(100) | list | tojson(indent=1000000) }}`: "chat template: tojson: more than 16777216 bytes",
		`{{ [[[1]]] | tojson(indent=' ' * 10000000) }}`:    "chat template: tojson: more than 16777216 bytes",
	} {
		_, err := renderGap(t, src)
		require.EqualError(t, err, msg, src)
	}
}

// A dict literal keeps its keys in insertion order, as a Python dict does,
// wherever its keys are listed; request data (Go maps, which keep no order)
// lists its keys sorted.
func TestTemplateDictOrder(t *testing.T) {
	for src, want := range map[string]string{
		`{{ {"b": 1, "a": 2} | tojson }}`: `{"b": 1, "a": 2}`,
		`{% for k, v in {"b": 1, "a": 2, "c": 3}.items() %}{{ k }}={{ v }};{% endfor %}|{% for k in {"b": 1, "a": 2} %}{{ k }}{% endfor %}|{{ {"b": 1, "a": 2}.keys() | list }}|{{ {"b": 1, "a": 2}.values() | list }}`: "b=1;a=2;c=3;|ba|['b', 'a']|[1, 2]",
		`{{ {"b": 1, "a": [1]} }}|{{ {"b": 1, "a": 2} | list }}|{{ {"b": 1, "a": 2} | first }}|{% for k, v in {"b": 1, "a": 2} | items %}{{ k }}{{ v }}{% endfor %}`:                                                    "{'b': 1, 'a': [1]}|['b', 'a']|b|b1a2",
		// A repeated key keeps its first place and takes its last value.
		// (The space in "} }" keeps "}}" from ending the tag.)
		`{{ {"a": 1, "b": 2, "a": 3} }}|{{ [{"y": 1, "x": 2}] | tojson }}|{{ {"b": {"d": 1, "c": 2} } | tojson }}`: `{'a': 3, 'b': 2}|[{"y": 1, "x": 2}]|{"b": {"d": 1, "c": 2}}`,
		// Order does not matter to ==, and a literal equals a request map.
		`{% set d = {"b": 1, "a": 2} %}{{ d == {"a": 2, "b": 1} }} {{ d | length }} {{ "a" in d }} {{ d.a }}{{ d["b"] }} {{ d.get("x", 5) }} {{ d is mapping }} {{ messages[0] == {"role": "user", "content": "hi"} }}`: "True 2 True 21 5 True True",
		`{{ messages[0] | tojson }}|{% for k, v in messages[0].items() %}{{ k }};{% endfor %}`:                                                                                                                          `{"content": "hi", "role": "user"}|content;role;`,
	} {
		got, err := renderGap(t, src)
		require.NoError(t, err, src)
		require.Equal(t, want, got, src)
	}

	// Render leaves the caller's maps and lists as they were.
	vars := gapVars()
	tpl, err := ParseTemplate(`{{ messages | length }}`)
	require.NoError(t, err)
	_, err = tpl.Render(vars)
	require.NoError(t, err)
	require.Equal(t, gapVars(), vars)

	// Request data nested past the limit is refused, not walked forever.
	var deep any = "x"
	for range maxTemplateDepth + 1 {
		deep = []any{deep}
	}
	_, err = tpl.Render(map[string]any{"messages": deep})
	require.EqualError(t, err, "chat template: a value nests more than 256 deep")
}

// "f % mapping" fills %(name)s conversions from the mapping, as Python's
// printf-style formatting does; the format filter does the same with
// keyword arguments.
func TestTemplatePercentMapping(t *testing.T) {
	for src, want := range map[string]string{
		`{{ "%(role)s: %(text)s" % {"role": "user", "text": "hi"} }}`:                                                                                                           "user: hi",
		`{{ "%(a)5.1f|%(b)-4d|%(a)r|%(c)s|%%" % {"a": 1.25, "b": 7, "c": [1, "x"]} }}`:                                                                                          "  1.2|7   |1.25|[1, 'x']|%",
		`{{ "%(a(b))s" % {"a(b)": 1} }}|{{ "%s %(a)s" % {"a": 1} }}|{{ "x" % {"a": 1} }}|{{ "%s" % 5 }}|{{ "%d%%" % 50 }}|{{ "%s" % "hi" }}|{{ 7 % 3 }}|{{ "%()s" % {"": 3} }}`: "1|{'a': 1} 1|x|5|50%|hi|1|3",
		`{% for m in messages %}{{ "%(role)s: %(content)s\n" % m }}{% endfor %}`:                                                                                                "user: hi\nassistant: yo\n",
		`{{ "%(a)s-%(b)s" | format(a=1, b="x") }}`:                                                                                                                              "1-x",
	} {
		got, err := renderGap(t, src)
		require.NoError(t, err, src)
		require.Equal(t, want, got, src)
	}

	for src, msg := range map[string]string{
		`{{ "%(role)s: %(text)s" % {"role": "user"} }}`: "chat template: format: no key 'text' in the mapping",
		`{{ "%(a)s" % 5 }}`:                             "chat template: format: %(a) needs a mapping, not a number",
		`{{ "%(a" % {"a": 1} }}`:                        "chat template: format: incomplete format key",
		`{{ "%(a)s %s" % {"a": 1} }}`:                   "chat template: format: not enough arguments for format string",
		`{{ "x" % 5 }}`:                                 "chat template: format: not all arguments converted during string formatting",
		`{{ "%(a)s" | format() }}`:                      "chat template: format: %(a) needs a mapping",
		`{{ "%(a)s" | format(1, 2) }}`:                  "chat template: format: %(a) needs a mapping",
		`{{ "%(a)s" | format(1, a=2) }}`:                "chat template: format: positional and keyword arguments together",
		`{{ "%(a)d" % {"a": "x"} }}`:                    "chat template: %d format: a number is required, not a string",
		`{{ 1 % "a" }}`:                                 `chat template: cannot apply "%" to a number and a string`,
	} {
		_, err := renderGap(t, src)
		require.EqualError(t, err, msg, src)
	}
}

// A "}}" inside brackets closes a dict, not the tag, as in Jinja's lexer;
// the expected texts are jinja2 3.1.6's.
func TestTemplateNestedBraces(t *testing.T) {
	for src, want := range map[string]string{
		`{{ {"a": {"b": 1}} | tojson }}`:                   `{"a": {"b": 1}}`,
		`{{ {"a": {"b": 1}}["a"]["b"] }}`:                  `1`,
		`{% set d = {"x": {"y": [1, 2]}} %}{{ d.x.y[1] }}`: `2`,
		`{{- {"k": {}} | length -}}`:                       `1`,
	} {
		tpl, err := ParseTemplate(src)
		require.NoError(t, err, src)
		got, err := tpl.Render(map[string]any{})
		require.NoError(t, err, src)
		require.Equal(t, want, got, src)
	}
}

// Parenthesized lists with a comma are tuples, and a tuple on the right of
// "%" gives its arguments; the expected texts are jinja2 3.1.6's.
func TestTemplateTuples(t *testing.T) {
	for src, want := range map[string]string{
		`{{ "%s and %s" % ("a", "b") }}`:           `a and b`,
		`{{ "%s!" % ("x",) }}`:                     `x!`,
		`{{ (1, 2) | length }}`:                    `2`,
		`{% for x in (3, 4) %}{{ x }}{% endfor %}`: `34`,
		`{{ "%d%%" % (50,) }}`:                     `50%`,
		`{{ () | length }}`:                        `0`,
		`{{ (1) + 2 }}`:                            `3`,
		`{{ "%s" % [1, 2] }}`:                      `[1, 2]`,
	} {
		tpl, err := ParseTemplate(src)
		require.NoError(t, err, src)
		got, err := tpl.Render(map[string]any{})
		require.NoError(t, err, src)
		require.Equal(t, want, got, src)
	}
}
