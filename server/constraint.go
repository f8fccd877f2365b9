package server

import (
	"encoding/json"
	"strings"

	"github.com/pinfer/pinfer/grammar"
)

// responseFormat is OpenAI's response_format: "text", "json_object" (any
// JSON object; llama-server also takes a schema beside it) or
// "json_schema" with the schema under json_schema.schema (without one,
// any JSON value).
type responseFormat struct {
	Type       string          `json:"type"`
	Schema     json.RawMessage `json:"schema"`
	JSONSchema *struct {
		Name   string          `json:"name"`
		Schema json.RawMessage `json:"schema"`
		Strict *bool           `json:"strict"`
	} `json:"json_schema"`
}

// constraint compiles what a request asks the text to match: grammar
// (GBNF), json_schema, or response_format; at most one of them. nil when
// none does.
func constraint(f *samplingFields) (*grammar.Grammar, *apiError) {
	var given []string
	if f.Grammar != nil && *f.Grammar != "" {
		given = append(given, "grammar")
	}
	if present(f.JSONSchema) {
		given = append(given, "json_schema")
	}
	rf := f.ResponseFormat
	if rf != nil && rf.Type != "text" && rf.Type != "" {
		given = append(given, "response_format")
	}
	if len(given) > 1 {
		return nil, badRequest(given[1], "invalid_value", "%s and %s each constrain the whole text: give one of them", given[0], given[1])
	}
	switch {
	case len(given) == 0:
		if rf != nil && rf.Type == "" {
			return nil, badRequest("response_format", "invalid_value", `response_format needs a type: "text", "json_object" or "json_schema"`)
		}
		return nil, nil
	case given[0] == "grammar":
		return compile("grammar", *f.Grammar)
	}
	if param, schema := requestSchema(f); schema != nil {
		return fromSchema(param, schema)
	}
	if rf.Type == "json_object" {
		return compile("response_format", grammar.JSON)
	}
	return nil, badRequest("response_format", "invalid_value", `response_format type %s is not one of "text", "json_object", "json_schema"`, quote(rf.Type))
}

// requestSchema is the schema that json_schema or response_format gives a
// request's text, and the field that gave it; nil for none, and for
// response_format json_object without a schema (any JSON object). The
// constraint and the tools' response (responseSchema) read it alike.
func requestSchema(f *samplingFields) (string, json.RawMessage) {
	if present(f.JSONSchema) {
		return "json_schema", f.JSONSchema
	}
	rf := f.ResponseFormat
	switch {
	case rf == nil:
	case rf.Type == "json_schema" && rf.JSONSchema != nil && present(rf.JSONSchema.Schema):
		return "response_format.json_schema.schema", rf.JSONSchema.Schema
	case (rf.Type == "json_schema" || rf.Type == "json_object") && present(rf.Schema):
		return "response_format.schema", rf.Schema // llama-server takes it for json_schema too
	case rf.Type == "json_schema":
		// OpenAI's json_schema.schema is optional; llama-server reads its
		// absence as the empty schema, which any JSON value matches.
		return "response_format", json.RawMessage(`{}`)
	}
	return "", nil
}

// ollamaFormat is ollama's format: "json" (any JSON object) or a schema.
func ollamaFormat(raw json.RawMessage) (*grammar.Grammar, *apiError) {
	if !present(raw) {
		return nil, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		switch s {
		case "":
			return nil, nil
		case "json":
			return compile("format", grammar.JSON)
		}
		return nil, badRequest("format", "invalid_value", `format must be "json" or a JSON schema, not %s`, quote(s))
	}
	return fromSchema("format", raw)
}

func present(raw json.RawMessage) bool {
	t := strings.TrimSpace(string(raw))
	return t != "" && t != "null"
}

// compile and fromSchema name the field in the message, and as the
// param the request's own field that holds it.
func compile(field, src string) (*grammar.Grammar, *apiError) {
	g, err := grammar.Parse(src)
	if err != nil {
		return nil, badRequest(strings.Split(field, ".")[0], "invalid_value", "%s: %v", field, err)
	}
	return g, nil
}

func fromSchema(field string, schema json.RawMessage) (*grammar.Grammar, *apiError) {
	src, err := grammar.FromSchema(schema)
	if err != nil {
		return nil, badRequest(strings.Split(field, ".")[0], "invalid_value", "%s: %v", field, err)
	}
	return compile(field, src)
}
