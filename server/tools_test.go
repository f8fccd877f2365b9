package server

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/pinfer/pinfer/grammar"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"
)

// The tools of these tests: their parameters are checked by an
// independent validator (santhosh-tekuri/jsonschema) against every call
// the model makes. Strings are short, so that a call ends in a few
// dozen tokens of the built-in model.
var testTools = []struct{ name, params string }{
	{"get_weather", `{"type":"object","properties":{"city":{"type":"string","maxLength":12},"days":{"type":"integer","minimum":1,"maximum":7},"unit":{"enum":["celsius","fahrenheit"]}},"required":["city","unit"],"additionalProperties":false}`},
	{"set_alarm", `{"type":"object","properties":{"hour":{"type":"integer","minimum":0,"maximum":23},"loud":{"type":"boolean"},"days":{"type":"array","items":{"enum":["mon","tue","wed"]},"maxItems":3}},"required":["hour"]}`},
	// $refs inside a tool's parameters point into them, wherever the
	// server puts them in the grammar's schema.
	{"move_to", `{"$defs":{"pos":{"type":"integer","minimum":0,"maximum":9}},"type":"object","properties":{"x":{"$ref":"#/$defs/pos"},"y":{"$ref":"#/$defs/pos"}},"required":["x","y"]}`},
	{"forecast", `{"type":"object","properties":{"city":{"type":"string","maxLength":12},"days":{"type":"integer","minimum":1,"maximum":7}},"required":["city"]}`},
}

// toolsField is "tools": [...] of the named test tools (all without names).
func toolsField(names ...string) string {
	var list []string
	for _, tt := range testTools {
		if len(names) > 0 && !strings.Contains(" "+strings.Join(names, " ")+" ", " "+tt.name+" ") {
			continue
		}
		desc := "A tool."
		if tt.name == "forecast" {
			desc = "Weather in a city." // with which the model calls it, often
		}
		list = append(list, `{"type":"function","function":{"name":"`+tt.name+`","description":"`+desc+`","parameters":`+tt.params+`}}`)
	}
	return `"tools":[` + strings.Join(list, ",") + `]`
}

// validators compiles each test tool's parameters with the reference
// validator.
func validators(t *testing.T) map[string]func(args string) error {
	out := map[string]func(string) error{}
	for _, tt := range testTools {
		c := jsonschema.NewCompiler()
		doc, err := jsonschema.UnmarshalJSON(strings.NewReader(tt.params))
		require.NoError(t, err)
		require.NoError(t, c.AddResource("params.json", doc))
		sch, err := c.Compile("params.json")
		require.NoError(t, err)
		out[tt.name] = func(args string) error {
			inst, err := jsonschema.UnmarshalJSON(strings.NewReader(args))
			if err != nil {
				return err
			}
			return sch.Validate(inst)
		}
	}
	return out
}

var callID = regexp.MustCompile(`^[A-Za-z0-9]{9}$`)

// checkCalls checks OpenAI tool calls: an id, type function, a test
// tool's name, and arguments (a JSON text) its schema accepts.
func checkCalls(t *testing.T, calls []any, valid map[string]func(string) error) {
	t.Helper()
	for _, c := range calls {
		call := c.(map[string]any)
		require.Regexp(t, callID, call["id"])
		require.Equal(t, "function", call["type"])
		fn := call["function"].(map[string]any)
		name, args := fn["name"].(string), fn["arguments"].(string)
		require.Contains(t, valid, name)
		require.NoError(t, valid[name](args), "%s(%s)", name, args)
	}
}

const toolsUser = `"messages":[{"role":"user","content":"Tool! Tool! Tool! toll the bell, toll!"}]`

// Every call the model makes, over seeds and temperatures, has arguments
// its tool's schema accepts; required, a named function and
// parallel_tool_calls are honoured, and the answer is OpenAI's:
// message.tool_calls, content null, finish_reason "tool_calls".
func TestToolCallsMatchSchemas(t *testing.T) {
	valid := validators(t)
	for _, tpl := range []string{"", qwen25Template} { // the generic format, and Hermes's
		_, url := start(t, Config{Ctx: 2048, ChatTemplate: tpl})
		seeds, temps := 4, []string{"0.3", "1.0", "1.6"}
		if tpl != "" { // Hermes's longer prompt: fewer
			seeds, temps = 2, []string{"0.5", "1.4"}
		}
		for seed := range seeds {
			for _, temp := range temps {
				parallel := seed == 1
				body := fmt.Sprintf(`{%s,%s,"tool_choice":"required","parallel_tool_calls":%v,"max_tokens":400,"seed":%d,"temperature":%s}`,
					toolsUser, toolsField(), parallel, seed, temp)
				code, out := post(t, url+"/v1/chat/completions", body)
				require.Equal(t, 200, code, "%v", out)
				ch := choice0(t, out)
				msg := ch["message"].(map[string]any)
				calls, _ := msg["tool_calls"].([]any)
				if ch["finish_reason"] == "length" { // parallel calls until max_tokens: the whole ones
					require.True(t, parallel, "%v", out)
				} else {
					require.Equal(t, "tool_calls", ch["finish_reason"], "%v", out)
					require.NotEmpty(t, calls)
				}
				require.Contains(t, msg, "content")
				require.Nil(t, msg["content"])
				if !parallel {
					require.Len(t, calls, 1)
				}
				checkCalls(t, calls, valid)
			}
		}
		// A named function: only it.
		for seed := range 2 {
			body := fmt.Sprintf(`{%s,%s,"tool_choice":{"type":"function","function":{"name":"move_to"}},"max_tokens":200,"seed":%d}`, toolsUser, toolsField(), seed)
			code, out := post(t, url+"/v1/chat/completions", body)
			require.Equal(t, 200, code, "%v", out)
			calls := choice0(t, out)["message"].(map[string]any)["tool_calls"].([]any)
			require.Len(t, calls, 1)
			require.Equal(t, "move_to", calls[0].(map[string]any)["function"].(map[string]any)["name"])
			checkCalls(t, calls, valid)
		}
		// auto: a call or a text, as the model chooses; a call is valid.
		kinds := map[string]int{}
		for seed := range 3 {
			body := fmt.Sprintf(`{%s,%s,"max_tokens":100,"seed":%d,"temperature":1.5}`, toolsUser, toolsField("forecast"), seed)
			code, out := post(t, url+"/v1/chat/completions", body)
			require.Equal(t, 200, code, "%v", out)
			msg := choice0(t, out)["message"].(map[string]any)
			if calls, ok := msg["tool_calls"].([]any); ok {
				kinds["calls"]++
				checkCalls(t, calls, valid)
			} else {
				kinds["text"]++
				require.IsType(t, "", msg["content"])
				require.NotEqual(t, "tool_calls", choice0(t, out)["finish_reason"])
			}
		}
		t.Logf("template %q, auto: %v", tpl[:min(len(tpl), 12)], kinds)
	}
}

// tool_choice none: the model writes text, and no grammar holds it.
func TestToolChoiceNone(t *testing.T) {
	_, url := start(t, Config{Ctx: 2048})
	plain := `{` + toolsUser + `,"max_tokens":30,"temperature":0}`
	_, want := post(t, url+"/v1/chat/completions", plain)
	for _, extra := range []string{`,` + toolsField() + `,"tool_choice":"none"`, `,"tools":[]`, `,"tools":null,"tool_choice":"auto"`} {
		code, out := post(t, url+"/v1/chat/completions", `{`+toolsUser+`,"max_tokens":30,"temperature":0`+extra+`}`)
		require.Equal(t, 200, code, "%v", out)
		msg := choice0(t, out)["message"].(map[string]any)
		require.NotContains(t, msg, "tool_calls")
		require.Equal(t, "length", choice0(t, out)["finish_reason"])
		// The default template shows no tools: the same prompt, the same text.
		require.Equal(t, completionText(t, want), msg["content"], extra)
	}
}

// Streamed, a call comes as OpenAI's deltas, as llama-server streams it:
// its index, id, type and name with arguments "", then pieces of the
// arguments, which join to the arguments of the same request unstreamed;
// the last chunk says tool_calls.
func TestToolCallsStreamed(t *testing.T) {
	valid := validators(t)
	for _, tpl := range []string{"", qwen25Template} {
		_, url := start(t, Config{Ctx: 2048, ChatTemplate: tpl})
		body := `{` + toolsUser + `,` + toolsField() + `,"tool_choice":"required","max_tokens":300,"temperature":0`
		code, out := post(t, url+"/v1/chat/completions", body+`}`)
		require.Equal(t, 200, code, "%v", out)
		whole := choice0(t, out)["message"].(map[string]any)["tool_calls"].([]any)[0].(map[string]any)["function"].(map[string]any)

		text, events := streamText(t, t.Context(), url+"/v1/chat/completions", body+`,"stream":true}`)
		require.Empty(t, text)
		var id, name, args string
		var finish any
		for i, ev := range events {
			ch := ev["choices"].([]any)[0].(map[string]any)
			if f := ch["finish_reason"]; f != nil {
				finish = f
			}
			d := ch["delta"].(map[string]any)
			tcs, ok := d["tool_calls"].([]any)
			if !ok {
				continue
			}
			require.Len(t, tcs, 1)
			tc := tcs[0].(map[string]any)
			require.Equal(t, 0.0, tc["index"])
			fn := tc["function"].(map[string]any)
			if id == "" {
				id, name = tc["id"].(string), fn["name"].(string)
				require.Equal(t, "function", tc["type"], "event %d", i)
				require.Equal(t, "", fn["arguments"])
				continue
			}
			require.NotContains(t, tc, "id")
			require.NotContains(t, fn, "name")
			args += fn["arguments"].(string)
		}
		require.Regexp(t, callID, id)
		require.Equal(t, whole["name"], name)
		require.Equal(t, whole["arguments"], args)
		require.Equal(t, "tool_calls", finish)
		checkCalls(t, []any{map[string]any{"id": id, "type": "function", "function": map[string]any{"name": name, "arguments": args}}}, valid)
	}
}

// ollama's /api/chat: message.tool_calls with arguments as an object,
// done_reason "stop"; streamed, a line with the call once it is whole.
// ollama has no tool_choice: of some seeds, the model calls in some.
func TestOllamaToolCalls(t *testing.T) {
	valid := validators(t)
	_, url := start(t, Config{Ctx: 2048})
	called := 0
	for seed := range 6 {
		body := fmt.Sprintf(`{"model":%q,%s,%s,"stream":false,"options":{"num_predict":120,"seed":%d,"temperature":1.5}}`, ollamaModelName, toolsUser, toolsField("forecast"), seed)
		code, out := post(t, url+"/api/chat", body)
		require.Equal(t, 200, code, "%v", out)
		msg := out["message"].(map[string]any)
		calls, ok := msg["tool_calls"].([]any)
		if !ok {
			continue
		}
		called++
		require.Equal(t, "stop", out["done_reason"])
		require.Equal(t, "", msg["content"])
		for _, c := range calls {
			fn := c.(map[string]any)["function"].(map[string]any)
			require.Equal(t, "forecast", fn["name"])
			require.IsType(t, map[string]any{}, fn["arguments"])
			require.NoError(t, valid["forecast"](mustJSON(fn["arguments"])))
		}
		// Streamed: the same call, on a line of its own.
		lines := ollamaStream(t, t.Context(), url+"/api/chat", strings.Replace(body, `"stream":false`, `"stream":true`, 1))
		var got []any
		for _, l := range lines {
			if tc, ok := l["message"].(map[string]any)["tool_calls"].([]any); ok {
				got = append(got, tc...)
			}
		}
		require.Equal(t, calls, got)
		require.Equal(t, "stop", lines[len(lines)-1]["done_reason"])
	}
	require.Positive(t, called, "no seed called the tool")
}

// The chat template gets the tools, the assistant's tool_calls (their
// arguments an object) and the tool's answer with its tool_call_id, as
// transformers passes them: a conversation renders through published
// tool-aware templates to what transformers' apply_chat_template gives
// (worked out by hand from each template's text). tool_choice none
// leaves the template's own prompt.
func TestToolTemplates(t *testing.T) {
	const conv = `"messages":[
		{"role":"system","content":"Be brief."},
		{"role":"user","content":"Weather in Paris?"},
		{"role":"assistant","content":null,"tool_calls":[{"id":"abc123def","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}}]},
		{"role":"tool","tool_call_id":"abc123def","content":"18C, sunny"}],
		"tools":[{"type":"function","function":{"name":"get_weather","description":"Weather in a city.","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}]`
	for _, c := range []struct{ name, tpl, choice, want string }{
		{"Qwen 2.5", qwen25Template, "none", "<|im_start|>system\nBe brief.\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>\n" +
			`{"type": "function", "function": {"name": "get_weather", "description": "Weather in a city.", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}` +
			"\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n" +
			"<|im_start|>user\nWeather in Paris?<|im_end|>\n<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call><|im_end|>\n" +
			"<|im_start|>user\n<tool_response>\n18C, sunny\n</tool_response><|im_end|>\n<|im_start|>assistant\n"},
		{"Llama 3.1", llama31Template, "none", "<s><|start_header_id|>system<|end_header_id|>\n\nEnvironment: ipython\nCutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\nBe brief.<|eot_id|>" +
			"<|start_header_id|>user<|end_header_id|>\n\nGiven the following functions, please respond with a JSON for a function call with its proper arguments that best answers the given prompt.\n\n" +
			`Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.Do not use variables.` + "\n\n" +
			"{\n    \"type\": \"function\",\n    \"function\": {\n        \"name\": \"get_weather\",\n        \"description\": \"Weather in a city.\",\n        \"parameters\": {\n            \"type\": \"object\",\n            \"properties\": {\n                \"city\": {\n                    \"type\": \"string\"\n                }\n            },\n            \"required\": [\n                \"city\"\n            ]\n        }\n    }\n}\n\n" +
			"Weather in Paris?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n" + `{"name": "get_weather", "parameters": {"city": "Paris"}}` + "<|eot_id|>" +
			"<|start_header_id|>ipython<|end_header_id|>\n\n\"18C, sunny\"<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"},
		// Mistral v0.3 shows the system prompt only with a last user message.
		{"Mistral v0.3", mistralV03Template, "none", `<s>[AVAILABLE_TOOLS] [{"type": "function", "function": {"name": "get_weather", "description": "Weather in a city.", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}][/AVAILABLE_TOOLS]` +
			`[INST] Weather in Paris?[/INST][TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "abc123def"}]</s>[TOOL_RESULTS] {"content": 18C, sunny, "call_id": "abc123def"}[/TOOL_RESULTS]`},
		// Hermes's format is the template's own: auto adds nothing to it.
		{"Qwen 2.5, auto", qwen25Template, "auto", ""},
		// The generic format tells the model how to call, in the system
		// message; a template that lists the tools itself is left to.
		{"Llama 3.1, auto", llama31Template, "auto", ""},
		// The built-in template knows no tools: they are listed, and the
		// assistant's calls are shown as the generic format writes them.
		{"built-in, none", "", "none", "system: Be brief.\nuser: Weather in Paris?\n" + `assistant: {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}` + "\ntool: 18C, sunny\nassistant:"},
		{"built-in, auto", "", "auto", "system: Be brief.\n\nYou can call these tools:\n" + `{"name":"get_weather","description":"Weather in a city.","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}` +
			"\n\nRespond in JSON format, either with `tool_calls` (a request to call tools) or with `response` (a reply to the user's request).\nuser: Weather in Paris?\n" +
			`assistant: {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}` + "\ntool: 18C, sunny\nassistant:"},
	} {
		_, url := start(t, Config{ChatTemplate: c.tpl})
		code, out := post(t, url+"/apply-template", `{`+conv+`,"tool_choice":"`+c.choice+`"}`)
		require.Equal(t, 200, code, "%s: %v", c.name, out)
		got := out["prompt"].(string)
		switch c.name {
		case "Qwen 2.5, auto":
			_, none := post(t, url+"/apply-template", `{`+conv+`,"tool_choice":"none"}`)
			require.Equal(t, none["prompt"], got)
		case "Llama 3.1, auto":
			require.Contains(t, got, "Be brief.\n\nRespond in JSON format, either with `tool_calls`")
			require.NotContains(t, got, "You can call these tools")
		default:
			require.Equal(t, c.want, got, c.name)
		}
	}
	// ollama's shapes render the same: arguments an object, tool_name.
	_, url := start(t, Config{ChatTemplate: qwen25Template})
	code, out := post(t, url+"/api/chat", `{"model":"`+ollamaModelName+`","stream":false,"options":{"num_predict":1},
		"messages":[{"role":"user","content":"Weather in Paris?"},
		{"role":"assistant","content":"","tool_calls":[{"function":{"name":"get_weather","arguments":{"city":"Paris"}}}]},
		{"role":"tool","tool_name":"get_weather","content":"18C, sunny"}]}`)
	require.Equal(t, 200, code, "%v", out)
	_, want := post(t, url+"/apply-template", `{"messages":[{"role":"user","content":"Weather in Paris?"},
		{"role":"assistant","tool_calls":[{"type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},
		{"role":"tool","name":"get_weather","content":"18C, sunny"}]}`)
	require.Contains(t, want["prompt"], `<tool_call>
{"name": "get_weather", "arguments": {"city": "Paris"}}
</tool_call><|im_end|>
<|im_start|>user
<tool_response>
18C, sunny
</tool_response><|im_end|>`)
	require.Equal(t, len(EncodeChat(builtin(t).Tok, want["prompt"].(string))), int(out["prompt_eval_count"].(float64)))
}

// What cannot be honoured is refused, naming the field.
func TestToolErrors(t *testing.T) {
	_, url := start(t, Config{})
	const chat, msgs = "/v1/chat/completions", `"messages":[{"role":"user","content":"hi"}],"max_tokens":2`
	fn := func(s string) string { return `"tools":[{"type":"function","function":` + s + `}]` }
	for _, c := range []struct{ path, fields, param, want string }{
		{chat, `"tools":[{"type":"retrieval"}]`, "tools", `tools[0].type must be "function", not "retrieval"`},
		{chat, `"tools":[5]`, "tools", "tools[0] must be an object"},
		{chat, `"tools":[{"type":"function"}]`, "tools", "tools[0].function must be an object"},
		{chat, fn(`{"parameters":{}}`), "tools", "tools[0].function.name must be a non-empty string"},
		{chat, fn(`{"name":"f","parameters":"x"}`), "tools", "tools[0].function.parameters must be a JSON Schema object"},
		{chat, fn(`{"name":"f","parameters":{"type":"object","properties":{"a":{"not":{}}}}}`), "tools", "tools[0].function.parameters: json schema: "},
		{chat, `"tools":[{"type":"function","function":{"name":"f"}},{"type":"function","function":{"name":"f"}}]`, "tools", `tools[1].function.name: "f" names two tools`},
		{chat, fn(`{"name":"f"}`) + `,"tool_choice":"sometimes"`, "tool_choice", `tool_choice must be "none", "auto", "required" or`},
		{chat, fn(`{"name":"f"}`) + `,"tool_choice":{"type":"function","function":{"name":"g"}}`, "tool_choice", `tool_choice names the function "g", which is not one of the tools`},
		{chat, fn(`{"name":"f"}`) + `,"tool_choice":{"type":"allowed_tools"}`, "tool_choice", `tool_choice must be`},
		{chat, `"tool_choice":"required"`, "tool_choice", `tool_choice "required" needs tools`},
		{chat, fn(`{"name":"f"}`) + `,"grammar":"root ::= \"a\""`, "grammar", "grammar cannot be used with tools"},
		{chat, `"parallel_tool_calls":"yes"`, "parallel_tool_calls", "parallel_tool_calls"},
		{chat, `"functions":[{"name":"f"}]`, "functions", "functions is not supported"},
		{chat, `"messages":[{"role":"assistant","tool_calls":[{"type":"code","function":{"name":"f"}}]}]`, "messages", `messages[0].tool_calls[0].type must be "function", not "code"`},
		{chat, `"messages":[{"role":"assistant","tool_calls":[{"type":"function","function":{}}]}]`, "messages", "messages[0].tool_calls[0].function.name is required"},
		{chat, `"messages":[{"role":"assistant","tool_calls":{"a":1}}]`, "messages", "messages[0].tool_calls must be an array"},
		{"/v1/completions", `"prompt":"a",` + fn(`{"name":"f"}`), "tools", "tools is not supported"},
		{"/apply-template", fn(`{"name":"f","parameters":{"type":"nonsense"}}`), "tools", "tools[0].function.parameters: json schema: "},
	} {
		body := "{" + msgs + "," + c.fields + "}"
		if strings.HasPrefix(c.fields, `"messages"`) || c.path == "/v1/completions" {
			body = "{" + c.fields + "}"
		}
		code, out := post(t, url+c.path, body)
		require.Equal(t, 400, code, "%s: %v", c.fields, out)
		e := out["error"].(map[string]any)
		require.Equal(t, c.param, e["param"], c.fields)
		require.Contains(t, e["message"], c.want, c.fields)
		require.NotContains(t, e["message"], "\n", c.fields)
	}
	// The Hermes format's text is free: a schema for it is refused.
	_, hermes := start(t, Config{ChatTemplate: qwen25Template})
	code, out := post(t, hermes+chat, "{"+msgs+","+fn(`{"name":"f"}`)+`,"response_format":{"type":"json_object"}}`)
	require.Equal(t, 400, code, "%v", out)
	require.Equal(t, "response_format", out["error"].(map[string]any)["param"])
	code, out = post(t, hermes+"/api/chat", `{"model":"`+ollamaModelName+`","messages":[{"role":"user","content":"hi"}],"format":"json",`+fn(`{"name":"f"}`)+`}`)
	require.Equal(t, 400, code, "%v", out)
	require.Contains(t, out["error"], "format cannot be used with tools")
	// ollama's, in its shape.
	code, out = post(t, url+"/api/chat", `{"model":"`+ollamaModelName+`","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"web_search"}]}`)
	require.Equal(t, 400, code, "%v", out)
	require.Contains(t, out["error"], `tools[0].type must be "function"`)
}

// The reply's parsers, on texts cut anywhere: what they give of a prefix
// is a prefix of what they give of the whole, so the stream's deltas join
// to the answer; escapes are decoded whole.
func TestToolReplyParsers(t *testing.T) {
	generic := `{"tool_calls": [{"name": "get_weather", "arguments": {"city": "P\u00e9ris \"x\"\n", "days": 12}}, {"name": "f", "arguments": {}}]}`
	hermes := "Let me see.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>"
	response := `{"response": "Good \ud83d\ude00 morrow\\"}`
	for _, c := range []struct {
		text    string
		hermes  bool
		content string
		calls   []parsedCall
	}{
		{generic, false, "", []parsedCall{{"get_weather", true, `{"city":"P\u00e9ris \"x\"\n","days":12}`, true}, {"f", true, "{}", true}}},
		{hermes, true, "Let me see.\n", []parsedCall{{"get_weather", true, `{"city":"Paris"}`, true}, {"f", true, "{}", true}}},
		{response, false, "Good 😀 morrow\\", nil},
		{"Hear me <tool_cal", true, "Hear me <tool_cal", nil},
	} {
		p := newToolParser(&toolPlan{hermes: c.hermes})
		var content string
		args := map[int]string{}
		for _, r := range c.text { // a rune at a time, as a stream
			for _, d := range p.deltas(string(r), false) {
				if d.Content != nil {
					content += *d.Content
				}
				for _, tc := range d.ToolCalls {
					args[*tc.Index] += *tc.Function.Arguments
				}
			}
		}
		for _, d := range p.deltas("", true) {
			if d.Content != nil {
				content += *d.Content
			}
		}
		require.Equal(t, c.content, content, c.text)
		require.Equal(t, c.calls, parsedOf(t, c.text, c.hermes))
		m, fin := newToolParser(&toolPlan{hermes: c.hermes}).message(c.text, "stop")
		require.Len(t, m.ToolCalls, len(c.calls))
		for i, pc := range c.calls {
			require.Equal(t, pc.args, args[i])
			require.Equal(t, pc.args, *m.ToolCalls[i].Function.Arguments)
			require.Equal(t, pc.name, m.ToolCalls[i].Function.Name)
		}
		if len(c.calls) > 0 {
			require.Equal(t, "tool_calls", fin)
		} else {
			require.Equal(t, c.content, *m.Content)
		}
	}
	// Cut short, a call is partial and the answer leaves it out.
	cut := generic[:60]
	m, fin := newToolParser(&toolPlan{}).message(cut, "length")
	require.Equal(t, "length", fin)
	require.Empty(t, m.ToolCalls)
	// Text that is not the format is the content.
	m, fin = newToolParser(&toolPlan{}).message("plain words", "stop")
	require.Equal(t, "plain words", *m.Content)
	require.Equal(t, "stop", fin)
}

func parsedOf(t *testing.T, text string, hermes bool) []parsedCall {
	p := newToolParser(&toolPlan{hermes: hermes})
	p.text.WriteString(text)
	_, calls, ok := p.parse(true)
	require.True(t, ok)
	return calls
}

// The Hermes grammar's free text: any text in which "<tool_call>" does
// not occur (Go's strings.Contains decides), then the call blocks.
func TestHermesFreeText(t *testing.T) {
	g, err := grammar.Parse(hermesGrammar(`tool-call ::= "{}"`+"\n", false, true))
	require.NoError(t, err)
	for _, s := range []string{"", "a", "<", "<tool_call", "<<tool_call", "a<tool_calx>b", "<tool_call<tool_call", "x <tool_call>\n{}\n</tool_call>",
		"<tool_call>\n{}\n</tool_call>\n<tool_call>\n{}\n</tool_call>", "a<tool_call>b", "<tool_call><tool_call>", "a<<tool_call>\n{}\n</tool_call>", "é<tool_call>"} {
		free := !strings.Contains(s, "<tool_call>")
		blocks := regexp.MustCompile(`^(?s:(.*?))(<tool_call>\n\{\}\n</tool_call>(\n<tool_call>\n\{\}\n</tool_call>)*)$`).FindStringSubmatch(s)
		want := free || blocks != nil && !strings.Contains(blocks[1], "<tool_call>")
		require.Equal(t, want, g.MatchString(s), "%q", s)
	}
	// Required: the blocks alone.
	g, err = grammar.Parse(hermesGrammar(`tool-call ::= "{}"`+"\n", true, false))
	require.NoError(t, err)
	require.True(t, g.MatchString("<tool_call>\n{}\n</tool_call>"))
	require.False(t, g.MatchString("a<tool_call>\n{}\n</tool_call>"))
	require.False(t, g.MatchString("<tool_call>\n{}\n</tool_call>\n<tool_call>\n{}\n</tool_call>"))
}

// rebaseRefs and renameRule leave data and quoted text alone.
func TestToolSchemaPlumbing(t *testing.T) {
	v, err := decodeOrdered([]byte(`{"$ref":"#/$defs/a","properties":{"$ref":{"$ref":"#"}},"enum":[{"$ref":"#/x"}],"const":{"$ref":"#"}}`), false)
	require.NoError(t, err)
	require.Equal(t, `{"$ref":"#/$defs/t/$defs/a","properties":{"$ref":{"$ref":"#/$defs/t"}},"enum":[{"$ref":"#/x"}],"const":{"$ref":"#"}}`, string(encodeOrdered(rebaseRefs(v, "#/$defs/t"))))
	require.Equal(t, "tool-call ::= \"root\" [root] root-1 tool-call\nroot-1 ::= tool-call", renameRule("root ::= \"root\" [root] root-1 root\nroot-1 ::= root", "root", "tool-call"))
	// Numbers keep their text; order is kept.
	v, err = decodeOrdered([]byte(`{"b":1.0,"a":[1e3,-0]}`), false)
	require.NoError(t, err)
	require.Equal(t, `{"b":1.0,"a":[1e3,-0]}`, string(encodeOrdered(v)))
}

// Qwen2.5-Instruct's tokenizer_config.json chat_template (Hermes-style
// tool calls), verbatim.
const qwen25Template = `{%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- if messages[0]['role'] == 'system' %}
        {{- messages[0]['content'] }}
    {%- else %}
        {{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}
    {%- endif %}
    {{- "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>" }}
    {%- for tool in tools %}
        {{- "\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n" }}
{%- else %}
    {%- if messages[0]['role'] == 'system' %}
        {{- '<|im_start|>system\n' + messages[0]['content'] + '<|im_end|>\n' }}
    {%- else %}
        {{- '<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n' }}
    {%- endif %}
{%- endif %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant" and not message.tool_calls) %}
        {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>' + '\n' }}
    {%- elif message.role == "assistant" %}
        {{- '<|im_start|>' + message.role }}
        {%- if message.content %}
            {{- '\n' + message.content }}
        {%- endif %}
        {%- for tool_call in message.tool_calls %}
            {%- if tool_call.function is defined %}
                {%- set tool_call = tool_call.function %}
            {%- endif %}
            {{- '\n<tool_call>\n{"name": "' }}
            {{- tool_call.name }}
            {{- '", "arguments": ' }}
            {{- tool_call.arguments | tojson }}
            {{- '}\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\n' }}
    {%- elif message.role == "tool" %}
        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\n<tool_response>\n' }}
        {{- message.content }}
        {{- '\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
{%- endif %}
`

// Llama-3.1-8B-Instruct's chat_template (JSON tool calls, tools in the
// first user message), verbatim.
const llama31Template = `{{- bos_token }}
{%- if custom_tools is defined %}
    {%- set tools = custom_tools %}
{%- endif %}
{%- if not tools_in_user_message is defined %}
    {%- set tools_in_user_message = true %}
{%- endif %}
{%- if not date_string is defined %}
    {%- set date_string = "26 Jul 2024" %}
{%- endif %}
{%- if not tools is defined %}
    {%- set tools = none %}
{%- endif %}

{#- This block extracts the system message, so we can slot it into the right place. #}
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content']|trim %}
    {%- set messages = messages[1:] %}
{%- else %}
    {%- set system_message = "" %}
{%- endif %}

{#- System message + builtin tools #}
{{- "<|start_header_id|>system<|end_header_id|>\n\n" }}
{%- if builtin_tools is defined or tools is not none %}
    {{- "Environment: ipython\n" }}
{%- endif %}
{%- if builtin_tools is defined %}
    {{- "Tools: " + builtin_tools | reject('equalto', 'code_interpreter') | join(", ") + "\n\n"}}
{%- endif %}
{{- "Cutting Knowledge Date: December 2023\n" }}
{{- "Today Date: " + date_string + "\n\n" }}
{%- if tools is not none and not tools_in_user_message %}
    {{- "You have access to the following functions. To call a function, please respond with JSON for a function call." }}
    {{- 'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.' }}
    {{- "Do not use variables.\n\n" }}
    {%- for t in tools %}
        {{- t | tojson(indent=4) }}
        {{- "\n\n" }}
    {%- endfor %}
{%- endif %}
{{- system_message }}
{{- "<|eot_id|>" }}

{#- Custom tools are passed in a user message with some extra guidance #}
{%- if tools_in_user_message and not tools is none %}
    {#- Extract the first user message so we can plug it in here #}
    {%- if messages | length != 0 %}
        {%- set first_user_message = messages[0]['content']|trim %}
        {%- set messages = messages[1:] %}
    {%- else %}
        {{- raise_exception("Cannot put tools in the first user message when there's no first user message!") }}
{%- endif %}
    {{- '<|start_header_id|>user<|end_header_id|>\n\n' -}}
    {{- "Given the following functions, please respond with a JSON for a function call " }}
    {{- "with its proper arguments that best answers the given prompt.\n\n" }}
    {{- 'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.' }}
    {{- "Do not use variables.\n\n" }}
    {%- for t in tools %}
        {{- t | tojson(indent=4) }}
        {{- "\n\n" }}
    {%- endfor %}
    {{- first_user_message + "<|eot_id|>"}}
{%- endif %}

{%- for message in messages %}
    {%- if not (message.role == 'ipython' or message.role == 'tool' or 'tool_calls' in message) %}
        {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' }}
    {%- elif 'tool_calls' in message %}
        {%- if not message.tool_calls|length == 1 %}
            {{- raise_exception("This model only supports single tool-calls at once!") }}
        {%- endif %}
        {%- set tool_call = message.tool_calls[0].function %}
        {%- if builtin_tools is defined and tool_call.name in builtin_tools %}
            {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' -}}
            {{- "<|python_tag|>" + tool_call.name + ".call(" }}
            {%- for arg_name, arg_val in tool_call.arguments | items %}
                {{- arg_name + '="' + arg_val + '"' }}
                {%- if not loop.last %}
                    {{- ", " }}
                {%- endif %}
                {%- endfor %}
            {{- ")" }}
        {%- else  %}
            {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' -}}
            {{- '{"name": "' + tool_call.name + '", ' }}
            {{- '"parameters": ' }}
            {{- tool_call.arguments | tojson }}
            {{- "}" }}
        {%- endif %}
        {%- if builtin_tools is defined %}
            {#- This means we're in ipython mode #}
            {{- "<|eom_id|>" }}
        {%- else %}
            {{- "<|eot_id|>" }}
        {%- endif %}
    {%- elif message.role == "tool" or message.role == "ipython" %}
        {{- "<|start_header_id|>ipython<|end_header_id|>\n\n" }}
        {%- if message.content is mapping or message.content is iterable %}
            {{- message.content | tojson }}
        {%- else %}
            {{- message.content }}
        {%- endif %}
        {{- "<|eot_id|>" }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' }}
{%- endif %}
`

// With tools, response_format constrains the generic format's response,
// as llama-server's does: a reply is a call or JSON of the schema.
func TestToolsWithResponseFormat(t *testing.T) {
	valid := validators(t)
	_, url := start(t, Config{Ctx: 2048})
	kinds := map[string]int{}
	for seed := range 3 {
		body := fmt.Sprintf(`{%s,%s,"response_format":{"type":"json_schema","json_schema":{"name":"scene","schema":%s}},"max_tokens":300,"seed":%d,"temperature":1.5}`,
			toolsUser, toolsField("forecast"), sceneSchema, seed)
		code, out := post(t, url+"/v1/chat/completions", body)
		require.Equal(t, 200, code, "%v", out)
		msg := choice0(t, out)["message"].(map[string]any)
		if calls, ok := msg["tool_calls"].([]any); ok {
			kinds["calls"]++
			checkCalls(t, calls, valid)
			continue
		}
		kinds["response"]++
		require.Equal(t, "stop", choice0(t, out)["finish_reason"])
		checkScene(t, msg["content"].(string))
	}
	t.Logf("%v", kinds)
}
