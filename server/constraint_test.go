package server

import (
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// jsonPrefix says whether text is JSON or the start of it, by
// encoding/json's tokenizer: it reads to the end, or stops only for want
// of more text.
func jsonPrefix(text string) bool {
	dec := json.NewDecoder(strings.NewReader(text))
	for {
		_, err := dec.Token()
		switch {
		case err == io.EOF:
			return true
		case errors.Is(err, io.ErrUnexpectedEOF):
			return true
		case err != nil:
			return strings.Contains(err.Error(), "unexpected EOF")
		}
	}
}

// A scene of the schema in every constrained response below: the keys in
// the schema's order, the values from its enums.
type scene struct {
	Mood  string   `json:"mood"`
	Armed bool     `json:"armed"`
	Lines []string `json:"lines"`
}

const sceneSchema = `{"type":"object","properties":{"mood":{"enum":["merry","sad"]},"armed":{"type":"boolean"},"lines":{"type":"array","items":{"enum":["ay","nay"]},"maxItems":3}},"required":["mood","armed","lines"],"additionalProperties":false}`

func checkScene(t *testing.T, text string) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(text))
	dec.DisallowUnknownFields()
	var s scene
	require.NoError(t, dec.Decode(&s), "%q", text)
	require.Contains(t, []string{"merry", "sad"}, s.Mood)
	require.LessOrEqual(t, len(s.Lines), 3)
	for _, l := range s.Lines {
		require.Contains(t, []string{"ay", "nay"}, l)
	}
	require.Less(t, strings.Index(text, `"mood"`), strings.Index(text, `"armed"`))
	require.Less(t, strings.Index(text, `"armed"`), strings.Index(text, `"lines"`))
}

// Every way a request constrains the text, on both APIs: the text is what
// was asked for (encoding/json and Go's regexp read it), and a finished
// one ends with "stop".
func TestConstrainedText(t *testing.T) {
	_, url := start(t, Config{})
	msgs := `"messages":[{"role":"user","content":"Speak, in JSON."}]`
	for seed := range 3 {
		sd := `,"seed":` + string(rune('0'+seed))
		code, out := post(t, url+"/v1/completions", `{"prompt":"ROMEO:","max_tokens":20,"grammar":"root ::= \" \" (\"yes\" | \"no\") \", my lord\" [.!]"`+sd+`}`)
		require.Equal(t, 200, code, "%v", out)
		require.Regexp(t, `^ (yes|no), my lord[.!]$`, completionText(t, out))
		require.Equal(t, "stop", out["choices"].([]any)[0].(map[string]any)["finish_reason"])

		for _, rf := range []string{
			`"response_format":{"type":"json_schema","json_schema":{"name":"scene","strict":true,"schema":` + sceneSchema + `}}`,
			`"response_format":{"type":"json_object","schema":` + sceneSchema + `}`,
			`"json_schema":` + sceneSchema,
		} {
			code, out = post(t, url+"/v1/chat/completions", `{`+msgs+`,"max_tokens":400,`+rf+sd+`}`)
			require.Equal(t, 200, code, "%v", out)
			checkScene(t, completionText(t, out))
			require.Equal(t, "stop", out["choices"].([]any)[0].(map[string]any)["finish_reason"], rf)
		}

		code, out = post(t, url+"/api/generate", `{"model":"`+ollamaModelName+`","prompt":"ROMEO:","stream":false,"format":`+sceneSchema+`,"options":{"num_predict":400`+sd+`}}`)
		require.Equal(t, 200, code, "%v", out)
		checkScene(t, out["response"].(string))
		require.Equal(t, "stop", out["done_reason"])

		// Any JSON object: JSON as far as it got.
		code, out = post(t, url+"/api/chat", `{"model":"`+ollamaModelName+`",`+msgs+`,"stream":false,"format":"json","options":{"num_predict":40`+sd+`}}`)
		require.Equal(t, 200, code, "%v", out)
		text := out["message"].(map[string]any)["content"].(string)
		require.True(t, strings.HasPrefix(text, "{") && jsonPrefix(text), "%q", text)
		if out["done_reason"] == "stop" {
			require.True(t, json.Valid([]byte(text)), "%q", text)
		}
		code, out = post(t, url+"/v1/chat/completions", `{`+msgs+`,"max_tokens":40,"response_format":{"type":"json_object"}`+sd+`}`)
		require.Equal(t, 200, code, "%v", out)
		text = completionText(t, out)
		require.True(t, strings.HasPrefix(text, "{") && jsonPrefix(text), "%q", text)
		// json_schema without a schema, as llama-server reads it: any
		// JSON value, an object or not.
		for _, rf := range []string{`{"type":"json_schema"}`, `{"type":"json_schema","json_schema":{"name":"any"}}`} {
			code, out = post(t, url+"/v1/chat/completions", `{`+msgs+`,"max_tokens":40,"response_format":`+rf+sd+`}`)
			require.Equal(t, 200, code, "%v", out)
			text = completionText(t, out)
			require.True(t, text != "" && jsonPrefix(text), "%s: %q", rf, text)
			if out["choices"].([]any)[0].(map[string]any)["finish_reason"] == "stop" {
				require.True(t, json.Valid([]byte(text)), "%q", text)
			}
		}
	}
	// Streamed, the deltas join to a text of the grammar too.
	text, _ := streamText(t, t.Context(), url+"/v1/chat/completions", `{`+msgs+`,"stream":true,"max_tokens":400,"seed":4,"json_schema":`+sceneSchema+`}`)
	checkScene(t, text)
}

func TestConstraintErrors(t *testing.T) {
	_, url := start(t, Config{})
	const (
		chat = "/v1/chat/completions"
		cmpl = "/v1/completions"
		msgs = `"messages":[{"role":"user","content":"hi"}],"max_tokens":2`
		prm  = `"prompt":"ROMEO:","max_tokens":2`
	)
	for _, c := range []struct{ path, fields, param, want string }{
		{cmpl, `"grammar":"root ::= x"`, "grammar", `grammar: grammar: line 1, column 10: rule "x" is used but not defined`},
		{cmpl, `"grammar":"root ::= \"a\"","json_schema":{"type":"string"}`, "json_schema", "grammar and json_schema each constrain the whole text"},
		{chat, `"json_schema":{"type":"nonsense"}`, "json_schema", "json_schema: json schema: "},
		{chat, `"response_format":{"type":"xml"}`, "response_format", `response_format type "xml" is not one of`},
		{chat, `"response_format":{}`, "response_format", "response_format needs a type"},
		{chat, `"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object","properties":{"a":{"$ref":"#/$defs/none"}}}}}`, "response_format", "response_format.json_schema.schema: json schema: "},
		{chat, `"grammar":"root ::= \"a\"","response_format":{"type":"json_object"}`, "response_format", "grammar and response_format each constrain"},
	} {
		base := map[string]string{chat: msgs, cmpl: prm}[c.path]
		code, out := post(t, url+c.path, "{"+base+","+c.fields+"}")
		require.Equal(t, 400, code, "%s %s: %v", c.path, c.fields, out)
		e := out["error"].(map[string]any)
		require.Equal(t, c.param, e["param"], c.fields)
		require.Equal(t, "invalid_value", e["code"], c.fields)
		require.Contains(t, e["message"], c.want, c.fields)
		require.NotContains(t, e["message"], "\n", c.fields)
	}
	// The off values are no constraint.
	for _, f := range []string{`"response_format":{"type":"text"}`, `"grammar":""`, `"json_schema":null`, `"response_format":null`} {
		code, out := post(t, url+chat, "{"+msgs+","+f+"}")
		require.Equal(t, 200, code, "%s: %v", f, out)
	}
}
