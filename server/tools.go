package server

// Tool calling (function calling), as llama-server (--jinja) and ollama
// give it: OpenAI's tools, tool_choice and parallel_tool_calls on
// /v1/chat/completions, ollama's tools on /api/chat.
//
// The chat template gets the request's tools, and the conversation's
// assistant tool_calls and tool results, as the Jinja variables
// transformers passes (tools, message.tool_calls, message.tool_call_id).
// The reply is then constrained by a grammar to a call of one of the
// tools, with arguments that match its parameters schema, in one of two
// formats:
//
//   - Hermes (Hermes 2 Pro, Qwen 2.5 and the templates like theirs, told
//     by "<tool_call>" in the template's text, as llama.cpp tells them):
//     the model's own format, text then <tool_call>\n{"name": ...,
//     "arguments": {...}}\n</tool_call> blocks; the template itself
//     describes the tools to the model.
//   - generic (every other template, llama.cpp's "generic" format): one
//     JSON object, {"tool_calls": [{"name": ..., "arguments": {...}}]} or
//     {"response": "..."}; a system message says so, and lists the tools
//     when the template does not.
//
// tool_choice "required" leaves out the text (the response), a named
// function leaves only that function, and parallel_tool_calls false (the
// default, as llama-server's) allows one call. The reply is parsed into
// OpenAI's message.tool_calls (finish_reason "tool_calls") or ollama's,
// and streamed as OpenAI's tool_calls deltas: a call's id, type and name
// once its name is whole, then its arguments piece by piece.

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"

	"github.com/pinfer/pinfer/grammar"
)

// ToolCall is a call an assistant message of the conversation made:
// Arguments is its JSON text (OpenAI sends it as a string, ollama as an
// object).
type ToolCall struct {
	ID, Name, Arguments string
}

// toolRequest is what a request says about tools, taken out of the
// sampling fields (which refuse tools, as /v1/completions must).
type toolRequest struct {
	tools    []json.RawMessage
	choice   json.RawMessage
	parallel *bool
}

// takeTools detaches the tool fields of a chat request.
func takeTools(f *samplingFields) toolRequest {
	t := toolRequest{tools: f.Tools, choice: f.ToolChoice, parallel: f.ParallelToolCalls}
	f.Tools, f.ToolChoice, f.ParallelToolCalls = nil, nil, nil
	return t
}

// toolFunc is one function of the request's tools.
type toolFunc struct {
	name   string
	fn     *dict // the tool's "function" object, as the template and the tools' list read it
	params *dict // its parameters schema, numbers kept as written
}

// toolPlan is how a request's tools are used: what the template gets,
// and, when the model may call them (active), the format of its reply.
type toolPlan struct {
	tools    []any // the request's tools as the template reads them
	funcs    []toolFunc
	choice   string // "auto", "required" or "none"
	forced   string // the function tool_choice names, if any
	parallel bool
	hermes   bool // the template's <tool_call> format; else the generic JSON
}

func (p *toolPlan) active() bool { return p != nil && p.choice != "none" && len(p.funcs) > 0 }

// parseTools reads tools, tool_choice and parallel_tool_calls. nil when
// there are no tools and the choice asks for none.
func parseTools(t toolRequest) (*toolPlan, *apiError) {
	p := &toolPlan{choice: "auto"} // parallel calls off unless asked, as llama-server's
	if t.parallel != nil {
		p.parallel = *t.parallel
	}
	seen := map[string]bool{}
	for i, raw := range t.tools {
		where := fmt.Sprintf("tools[%d]", i)
		v, err := decodeOrdered(raw, false)
		tool, ok := v.(*dict)
		if err != nil || !ok {
			return nil, badRequest("tools", "invalid_value", "%s must be an object", where)
		}
		if typ, _ := tool.m["type"].(string); typ != "function" {
			return nil, badRequest("tools", "unsupported_value", `%s.type must be "function", not %s`, where, jsonText(tool.m["type"]))
		}
		fn, ok := tool.m["function"].(*dict)
		if !ok {
			return nil, badRequest("tools", "invalid_value", "%s.function must be an object", where)
		}
		name, _ := fn.m["name"].(string)
		if name == "" {
			return nil, badRequest("tools", "invalid_value", "%s.function.name must be a non-empty string", where)
		}
		if seen[name] {
			return nil, badRequest("tools", "invalid_value", "%s.function.name: %s names two tools", where, quote(name))
		}
		seen[name] = true
		params, _ := fn.m["parameters"].(*dict)
		switch pv, has := fn.m["parameters"]; {
		case !has || pv == nil:
			params = newDict(2)
			params.set("type", "object")
			params.set("properties", newDict(0))
		case params == nil:
			return nil, badRequest("tools", "invalid_value", "%s.function.parameters must be a JSON Schema object", where)
		}
		if _, err := grammar.FromSchema(encodeOrdered(params)); err != nil {
			return nil, badRequest("tools", "invalid_value", "%s.function.parameters: %v", where, err)
		}
		tv, _ := decodeOrdered(raw, true)
		p.tools = append(p.tools, tv)
		p.funcs = append(p.funcs, toolFunc{name: name, fn: tv.(*dict).m["function"].(*dict), params: params})
	}
	if present(t.choice) {
		var s string
		if json.Unmarshal(t.choice, &s) == nil {
			switch s {
			case "auto", "none", "required":
				p.choice = s
			default:
				return nil, badRequest("tool_choice", "invalid_value", `tool_choice must be "none", "auto", "required" or {"type": "function", "function": {"name": ...}}, not %s`, quote(s))
			}
		} else {
			var named struct {
				Type     string `json:"type"`
				Function struct {
					Name string `json:"name"`
				} `json:"function"`
			}
			if err := json.Unmarshal(t.choice, &named); err != nil || named.Type != "function" || named.Function.Name == "" {
				return nil, badRequest("tool_choice", "invalid_value", `tool_choice must be "none", "auto", "required" or {"type": "function", "function": {"name": ...}}`)
			}
			if !seen[named.Function.Name] {
				return nil, badRequest("tool_choice", "invalid_value", "tool_choice names the function %s, which is not one of the tools", quote(named.Function.Name))
			}
			p.choice, p.forced = "required", named.Function.Name
		}
	}
	if len(p.funcs) == 0 {
		if p.choice == "required" {
			// (a named function is one of the tools: parseTools checked it)
			return nil, badRequest("tool_choice", "invalid_value", `tool_choice "required" needs tools`)
		}
		return nil, nil
	}
	return p, nil
}

// toolSetup reads a chat request's tools and, when the model may call
// them, constrains its reply: g.grammar becomes the tools' grammar (a
// response_format or json_schema then constrains the response) and
// g.tools the plan the reply is parsed by.
func (s *Server) toolSetup(g *genParams, t toolRequest, f *samplingFields) (*toolPlan, *apiError) {
	p, e := parseTools(t)
	if e != nil || !p.active() {
		return p, e
	}
	if f != nil && f.Grammar != nil && *f.Grammar != "" {
		return nil, badRequest("grammar", "invalid_value", "grammar cannot be used with tools: the tools' grammar constrains the reply (response_format or json_schema may constrain its text)")
	}
	param := "json_schema"
	if f != nil && f.ResponseFormat != nil {
		param = "response_format"
	}
	return p, s.toolGrammar(g, p, responseSchema(f), param)
}

// toolGrammar compiles the reply's grammar for the plan's format. resp,
// the schema of a response (respParam's), is the generic format's: the
// Hermes format's text is free, and one asked for is refused.
func (s *Server) toolGrammar(g *genParams, p *toolPlan, resp json.RawMessage, respParam string) *apiError {
	p.hermes = s.chat != nil && s.chat.hermes
	if p.hermes && resp != nil && p.choice != "required" {
		return badRequest(respParam, "unsupported_value", "%s cannot be used with tools under this chat template: its tool calls (<tool_call>) follow free text, which a schema cannot hold", respParam)
	}
	src, err := p.grammarSource(resp)
	if err != nil {
		return badRequest("tools", "invalid_value", "tools: %v", err)
	}
	gr, err := grammar.Parse(tightBlanks(src))
	if err != nil {
		return badRequest("tools", "invalid_value", "tools: %v", err)
	}
	g.grammar, g.tools = gr, p
	return nil
}

// tightBlanks lets a call have at most one blank or newline between its
// JSON tokens, where a schema's grammar allows a newline and twenty
// blanks: the calls models write are compact ({"name": "f", ...}), and a
// weak model that likes blanks would spend its tokens on them.
func tightBlanks(src string) string {
	lines := strings.Split(src, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "ws ::= ") {
			lines[i] = `ws ::= [ \n]?`
		}
	}
	return strings.Join(lines, "\n")
}

// responseSchema is the schema a request gives the text of its reply
// (json_schema or response_format), which the response of the generic
// format then follows, as llama-server's does; nil for any text.
func responseSchema(f *samplingFields) json.RawMessage {
	if f == nil {
		return nil
	}
	if _, s := requestSchema(f); s != nil {
		return s
	}
	if rf := f.ResponseFormat; rf != nil && rf.Type == "json_object" {
		return json.RawMessage(`{"type":"object"}`)
	}
	return nil
}

// The Hermes format's markers.
const (
	hermesOpen  = "<tool_call>"
	hermesClose = "</tool_call>"
)

// callsSchema is the JSON Schema of one call: the name, one of the
// allowed functions', then arguments of its parameters ($defs/toolN).
func (p *toolPlan) callsSchema() (call *dict, defs *dict) {
	defs = newDict(len(p.funcs))
	var alts []any
	for i, f := range p.funcs {
		if p.forced != "" && f.name != p.forced {
			continue
		}
		id := "tool" + strconv.Itoa(i)
		params := rebaseRefs(f.params, "#/$defs/"+id).(*dict)
		delete(params.m, "$id") // allowed at a root only, which it no longer is
		delete(params.m, "$schema")
		params.keys = slices.DeleteFunc(params.keys, func(k string) bool { return k == "$id" || k == "$schema" })
		if _, typed := params.m["type"]; !typed {
			params.set("type", "object") // arguments are an object
		}
		defs.set(id, params)
		name := newDict(1)
		name.set("const", f.name)
		ref := newDict(1)
		ref.set("$ref", "#/$defs/"+id)
		props := newDict(2)
		props.set("name", name)
		props.set("arguments", ref)
		alts = append(alts, object(props, "name", "arguments"))
	}
	if len(alts) == 1 {
		return alts[0].(*dict), defs
	}
	call = newDict(1)
	call.set("anyOf", alts)
	return call, defs
}

// object is {"type": "object", "properties": props, "required": req,
// "additionalProperties": false}.
func object(props *dict, req ...string) *dict {
	d := newDict(4)
	d.set("type", "object")
	d.set("properties", props)
	r := make([]any, len(req))
	for i, k := range req {
		r[i] = k
	}
	d.set("required", r)
	d.set("additionalProperties", false)
	return d
}

// grammarSource is the GBNF of the reply.
func (p *toolPlan) grammarSource(resp json.RawMessage) (string, error) {
	call, defs := p.callsSchema()
	if p.hermes {
		root := newDict(2)
		root.set("anyOf", []any{call})
		root.set("$defs", defs)
		src, err := grammar.FromSchema(encodeOrdered(root))
		if err != nil {
			return "", err
		}
		return hermesGrammar(renameRule(src, "root", "tool-call"), p.choice == "required", p.parallel), nil
	}
	arr := newDict(4)
	arr.set("type", "array")
	arr.set("items", call)
	arr.set("minItems", 1)
	if !p.parallel {
		arr.set("maxItems", 1)
	}
	props := newDict(1)
	props.set("tool_calls", arr)
	calls := object(props, "tool_calls")
	root := calls
	if p.choice != "required" {
		rs := newDict(1)
		rs.set("type", "string")
		if resp != nil {
			v, err := decodeOrdered(resp, false)
			if err != nil {
				return "", err
			}
			defs.set("response", rebaseRefs(v, "#/$defs/response"))
			rs = newDict(1)
			rs.set("$ref", "#/$defs/response")
		}
		rp := newDict(1)
		rp.set("response", rs)
		root = newDict(2)
		root.set("anyOf", []any{calls, object(rp, "response")})
	}
	root.set("$defs", defs)
	return grammar.FromSchema(encodeOrdered(root))
}

// hermesGrammar wraps the grammar of a call (rule tool-call) in the
// Hermes format: with required, only <tool_call> blocks (one, or one
// after another when parallel); else any text without "<tool_call>" in
// it, then optionally the blocks.
func hermesGrammar(call string, required, parallel bool) string {
	var b strings.Builder
	b.WriteString(call)
	b.WriteString("tool-block ::= " + strconv.Quote(hermesOpen+"\n") + " tool-call " + strconv.Quote("\n"+hermesClose) + "\n")
	if parallel {
		b.WriteString("tool-blocks ::= tool-block ( \"\\n\" tool-block )*\n")
	} else {
		b.WriteString("tool-blocks ::= tool-block\n")
	}
	if required {
		b.WriteString("root ::= tool-blocks\n")
		return b.String()
	}
	b.WriteString("root ::= free-0 tool-blocks?\n")
	b.WriteString(withoutText(hermesOpen, "free"))
	return b.String()
}

// withoutText writes rules name-0 ... name-(n-1) that match the texts in
// which pat does not occur: name-k is the state of having just read the
// first k bytes of pat (the automaton of Knuth, Morris and Pratt), and
// each state may end the text. pat is ASCII.
func withoutText(pat, name string) string {
	n := len(pat)
	next := func(k int, c byte) int { // the state after reading c in state k
		for {
			if pat[k] == c {
				return k + 1
			}
			if k == 0 {
				return 0
			}
			// the longest proper border of pat[:k]
			b := 0
			for l := k - 1; l > 0; l-- {
				if pat[:l] == pat[k-l:k] {
					b = l
					break
				}
			}
			k = b
		}
	}
	var out strings.Builder
	for k := 0; k < n; k++ {
		to := map[int][]byte{} // the bytes of pat that lead elsewhere than state 0
		for i := 0; i < n; i++ {
			c := pat[i]
			if dup := bytes.IndexByte(flat(to), c) >= 0; dup {
				continue
			}
			if j := next(k, c); j != 0 {
				to[j] = append(to[j], c)
			}
		}
		fmt.Fprintf(&out, "%s-%d ::= (", name, k)
		var others []byte
		first := true
		for j := 1; j <= n; j++ {
			cs := to[j]
			if len(cs) == 0 {
				continue
			}
			others = append(others, cs...)
			if j == n {
				continue // reading the whole of pat: no way on
			}
			if !first {
				out.WriteString(" |")
			}
			first = false
			fmt.Fprintf(&out, " %s %s-%d", charClass(cs, false), name, j)
		}
		if !first {
			out.WriteString(" |")
		}
		fmt.Fprintf(&out, " %s %s-0 )?\n", charClass(others, true), name)
	}
	return out.String()
}

func flat(m map[int][]byte) []byte {
	var out []byte
	for _, v := range m {
		out = append(out, v...)
	}
	return out
}

// charClass is a GBNF character class of the ASCII bytes cs, or of every
// character but them.
func charClass(cs []byte, negate bool) string {
	var b strings.Builder
	b.WriteByte('[')
	if negate {
		b.WriteByte('^')
	}
	for _, c := range cs {
		switch c {
		case '\\', ']', '[', '^', '-':
			b.WriteByte('\\')
		}
		b.WriteByte(c)
	}
	b.WriteByte(']')
	return b.String()
}

// renameRule renames the rule from to to in GBNF text, where it is
// defined and where it is referred to, leaving quoted strings and
// character classes as they are.
func renameRule(src, from, to string) string {
	var b strings.Builder
	isName := func(c byte) bool {
		return c == '-' || c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
	}
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == '"' || c == '[':
			end := byte('"')
			if c == '[' {
				end = ']'
			}
			j := i + 1
			for j < len(src) && src[j] != end {
				if src[j] == '\\' {
					j++
				}
				j++
			}
			j = min(j+1, len(src))
			b.WriteString(src[i:j])
			i = j
		case c == '#':
			j := strings.IndexByte(src[i:], '\n')
			if j < 0 {
				j = len(src) - i
			}
			b.WriteString(src[i : i+j])
			i += j
		case isName(c):
			j := i
			for j < len(src) && isName(src[j]) {
				j++
			}
			if src[i:j] == from {
				b.WriteString(to)
			} else {
				b.WriteString(src[i:j])
			}
			i = j
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String()
}

// rebaseRefs copies a schema with its local $refs ("#...") made to point
// into it where it now sits, at base. Values that are data, not schemas
// (enum, const, default, examples), are left alone, and the keys of
// properties, $defs and the like are names, not keywords.
func rebaseRefs(v any, base string) any {
	d, ok := v.(*dict)
	if !ok {
		return v
	}
	out := newDict(len(d.keys))
	for _, k := range d.keys {
		x := d.m[k]
		switch k {
		case "$ref":
			if s, ok := x.(string); ok && strings.HasPrefix(s, "#") && (len(s) == 1 || s[1] == '/') {
				x = base + s[1:]
			}
		case "enum", "const", "default", "examples":
		case "properties", "$defs", "definitions", "patternProperties", "dependentSchemas":
			if named, ok := x.(*dict); ok {
				m := newDict(len(named.keys))
				for _, name := range named.keys {
					m.set(name, rebaseRefs(named.m[name], base))
				}
				x = m
			}
		default:
			if list, ok := x.([]any); ok { // anyOf, allOf, prefixItems, ...
				l := make([]any, len(list))
				for i, e := range list {
					l[i] = rebaseRefs(e, base)
				}
				x = l
			} else {
				x = rebaseRefs(x, base) // items, not, additionalProperties, ...
			}
		}
		out.set(k, x)
	}
	return out
}

// decodeOrdered decodes JSON keeping the order of object members
// (*dict), as Python's json module does. With forTemplate, numbers are
// the template's (int for an integer, else float64); without, they stay
// json.Number, written back as they were.
func decodeOrdered(raw []byte, forTemplate bool) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := readOrdered(dec, forTemplate, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data after the JSON value")
	}
	return v, nil
}

func readOrdered(dec *json.Decoder, forTemplate bool, depth int) (any, error) {
	if depth > maxTemplateDepth {
		return nil, fmt.Errorf("JSON nested more than %d deep", maxTemplateDepth)
	}
	t, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := t.(type) {
	case json.Delim:
		switch t {
		case '{':
			d := newDict(0)
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				v, err := readOrdered(dec, forTemplate, depth+1)
				if err != nil {
					return nil, err
				}
				d.set(kt.(string), v)
			}
			_, err := dec.Token()
			return d, err
		case '[':
			l := []any{}
			for dec.More() {
				v, err := readOrdered(dec, forTemplate, depth+1)
				if err != nil {
					return nil, err
				}
				l = append(l, v)
			}
			_, err := dec.Token()
			return l, err
		}
	case json.Number:
		if !forTemplate {
			return t, nil
		}
		if !strings.ContainsAny(string(t), ".eE") {
			if n, err := t.Int64(); err == nil && int64(int(n)) == n {
				return int(n), nil
			}
		}
		f, _ := t.Float64()
		return f, nil
	}
	return t, nil
}

// encodeOrdered writes a value decodeOrdered read as compact JSON.
func encodeOrdered(v any) []byte {
	var b bytes.Buffer
	writeOrdered(&b, v)
	return b.Bytes()
}

func writeOrdered(b *bytes.Buffer, v any) {
	switch v := v.(type) {
	case *dict:
		b.WriteByte('{')
		for i, k := range v.keys {
			if i > 0 {
				b.WriteByte(',')
			}
			writeOrdered(b, k)
			b.WriteByte(':')
			writeOrdered(b, v.m[k])
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for i, x := range v {
			if i > 0 {
				b.WriteByte(',')
			}
			writeOrdered(b, x)
		}
		b.WriteByte(']')
	case json.Number:
		b.WriteString(string(v))
	default:
		enc := json.NewEncoder(b)
		enc.SetEscapeHTML(false)
		enc.Encode(v)
		b.Truncate(b.Len() - 1) // the newline
	}
}

// jsonText is a decoded value as compact JSON, for messages.
func jsonText(v any) string { return string(encodeOrdered(v)) }

// parseToolCalls reads the tool_calls of messages[i]: OpenAI's
// [{"id", "type": "function", "function": {"name", "arguments": "{...}"}}]
// or ollama's [{"function": {"name", "arguments": {...}}}].
func parseToolCalls(raw json.RawMessage, i int) ([]ToolCall, *apiError) {
	if !present(raw) {
		return nil, nil
	}
	var calls []struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function *struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"function"`
	}
	if err := json.Unmarshal(raw, &calls); err != nil {
		return nil, badRequest("messages", "invalid_value", "messages[%d].tool_calls must be an array of tool calls", i)
	}
	out := make([]ToolCall, len(calls))
	for k, c := range calls {
		where := fmt.Sprintf("messages[%d].tool_calls[%d]", i, k)
		if c.Type != "" && c.Type != "function" {
			return nil, badRequest("messages", "unsupported_value", `%s.type must be "function", not %s`, where, quote(c.Type))
		}
		if c.Function == nil || c.Function.Name == "" {
			return nil, badRequest("messages", "invalid_value", "%s.function.name is required", where)
		}
		args := "{}"
		var s string
		switch {
		case !present(c.Function.Arguments):
		case json.Unmarshal(c.Function.Arguments, &s) == nil:
			args = s
		default:
			args = string(c.Function.Arguments)
		}
		out[k] = ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: args}
	}
	return out, nil
}

// PromptTools renders the conversation as Prompt does, with tools (the
// request's, as the template reads them; nil for none) and each message's
// tool calls and tool_call_id. A call's arguments are the object their
// JSON text is, as transformers' templates expect (their string when it
// is not JSON). A template that knows nothing of tool calls (no
// "tool_calls" in its text) gets an assistant message's calls as its
// content, in the generic format's JSON.
func (c *Chat) PromptTools(msgs []ChatMessage, tools []any) (string, error) {
	native := c.nativeCalls
	list := make([]any, len(msgs))
	for i, m := range msgs {
		e := map[string]any{"role": m.Role, "content": m.Content}
		if m.Name != "" {
			e["name"] = m.Name
		}
		if m.ToolCallID != "" {
			e["tool_call_id"] = m.ToolCallID
		}
		if len(m.ToolCalls) > 0 {
			calls := make([]any, len(m.ToolCalls))
			for k, tc := range m.ToolCalls {
				fn := newDict(2)
				fn.set("name", tc.Name)
				var args any = tc.Arguments
				if v, err := decodeOrdered([]byte(tc.Arguments), true); err == nil {
					if _, isObj := v.(*dict); isObj {
						args = v
					}
				}
				fn.set("arguments", args)
				call := newDict(3)
				if tc.ID != "" {
					call.set("id", tc.ID)
				}
				call.set("type", "function")
				call.set("function", fn)
				calls[k] = call
			}
			if native {
				e["tool_calls"] = calls
			} else {
				e["content"] = genericCallsText(calls, m.Content)
			}
		}
		list[i] = e
	}
	vars := map[string]any{
		"messages":              list,
		"bos_token":             c.bos,
		"eos_token":             c.eos,
		"add_generation_prompt": true,
	}
	if tools != nil {
		vars["tools"] = tools
	}
	return c.tpl.Render(vars)
}

// genericCallsText is an assistant message's calls as the generic format
// writes them, for a template that cannot show them otherwise.
func genericCallsText(calls []any, content string) string {
	list := make([]any, len(calls))
	for i, c := range calls {
		fn := c.(*dict).m["function"].(*dict)
		d := newDict(2)
		d.set("name", fn.m["name"])
		d.set("arguments", fn.m["arguments"])
		list[i] = d
	}
	out := newDict(2)
	out.set("tool_calls", list)
	if content != "" {
		out.set("content", content)
	}
	w := &jsonWriter{}
	w.value(out, 0)
	return w.b.String()
}

// toolPrompt renders a chat request's conversation: the template gets the
// tools, and with the generic format a system message (the first one, or
// one put first) says how to call them, listing them when the template
// does not (no "tools" in its text). A template that refuses a system
// message (raise_exception) gets that text at the start of the first
// user message instead.
func (s *Server) toolPrompt(msgs []ChatMessage, p *toolPlan) (string, *apiError) {
	if p == nil {
		prompt, err := s.chat.Prompt(msgs)
		return prompt, templateError(err)
	}
	if p.active() && !p.hermes {
		note := p.genericNote(s.chat.listsTools)
		with := withSystem(msgs, note)
		prompt, err := s.chat.PromptTools(with, p.tools)
		if errors.As(err, new(*raised)) {
			if with, ok := withUserNote(msgs, note); ok {
				prompt, err = s.chat.PromptTools(with, p.tools)
			}
		}
		return prompt, templateError(err)
	}
	prompt, err := s.chat.PromptTools(msgs, p.tools)
	return prompt, templateError(err)
}

// templateError reads a template's failure: raise_exception is the
// template refusing this conversation, which the client can fix; any
// other error is in the model's template.
func templateError(err error) *apiError {
	if err == nil {
		return nil
	}
	if errors.As(err, new(*raised)) {
		return badRequest("messages", "invalid_conversation", "%v", err)
	}
	return newError(http.StatusInternalServerError, "server_error", "chat_template_error", "the model's tokenizer.chat_template failed: %v", err)
}

func withSystem(msgs []ChatMessage, note string) []ChatMessage {
	out := make([]ChatMessage, 0, len(msgs)+1)
	if len(msgs) > 0 && msgs[0].Role == "system" {
		first := msgs[0]
		first.Content += "\n\n" + note
		return append(append(out, first), msgs[1:]...)
	}
	return append(append(out, ChatMessage{Role: "system", Content: note}), msgs...)
}

func withUserNote(msgs []ChatMessage, note string) ([]ChatMessage, bool) {
	out := append([]ChatMessage(nil), msgs...)
	for i, m := range out {
		if m.Role == "user" {
			out[i].Content = note + "\n\n" + m.Content
			return out, true
		}
	}
	return nil, false
}

// genericNote tells the model the generic format (and the tools, when
// the template does not list them).
func (p *toolPlan) genericNote(templateListsTools bool) string {
	var b strings.Builder
	if !templateListsTools {
		b.WriteString("You can call these tools:\n")
		for _, f := range p.funcs {
			if p.forced == "" || f.name == p.forced {
				b.WriteString(string(encodeOrdered(f.fn)) + "\n")
			}
		}
		b.WriteString("\n")
	}
	switch {
	case p.forced != "":
		fmt.Fprintf(&b, "Respond in JSON format with `tool_calls`, a request to call the tool `%s`.", p.forced)
	case p.choice == "required":
		b.WriteString("Respond in JSON format with `tool_calls`, a request to call tools.")
	default:
		b.WriteString("Respond in JSON format, either with `tool_calls` (a request to call tools) or with `response` (a reply to the user's request).")
	}
	return b.String()
}

// Parsing the reply.

// parsedCall is a call read from the reply so far.
type parsedCall struct {
	name     string
	nameDone bool
	args     string // compact JSON, as far as written
	argsDone bool
}

// toolParser reads a reply as it comes: the text (the generic format's
// response, or the Hermes format's text before the calls) and the calls,
// each with the id the server gave it.
type toolParser struct {
	plan *toolPlan
	text strings.Builder
	ids  []string
	// what was streamed: the content's bytes, the calls begun, and each
	// call's arguments' bytes
	sentContent int
	sentCalls   int
	sentArgs    []int
	ollamaSent  int // calls sent whole (ollama)
}

func newToolParser(p *toolPlan) *toolParser { return &toolParser{plan: p} }

// parse reads the reply so far; final when no more will come.
func (tp *toolParser) parse(final bool) (content string, calls []parsedCall, ok bool) {
	text := tp.text.String()
	if tp.plan.hermes {
		content, calls, ok = parseHermes(text, final)
	} else {
		content, calls, ok = parseGeneric(text, final)
	}
	for len(tp.ids) < len(calls) {
		tp.ids = append(tp.ids, toolCallID())
	}
	return content, calls, ok
}

// toolCallID is a call's id: nine letters and digits, the form Mistral's
// templates require of the ids sent back.
func toolCallID() string {
	const alnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 9)
	rand.Read(b)
	for i := range b {
		b[i] = alnum[int(b[i])%len(alnum)]
	}
	return string(b)
}

func parseGeneric(text string, final bool) (content string, calls []parsedCall, ok bool) {
	p := &partialJSON{s: text, final: final}
	root, _ := p.value(0)
	if p.bad || root != nil && root.kind != '{' {
		return "", nil, false
	}
	if root == nil {
		return "", nil, true
	}
	for i, k := range root.keys {
		v := root.vals[i]
		if v == nil {
			continue
		}
		switch k {
		case "response":
			if v.kind == '"' {
				content = v.str
			} else {
				content = compactJSON(text[v.start:v.end])
			}
		case "tool_calls":
			for _, it := range v.items {
				calls = append(calls, p.call(it))
			}
		case "tool_call":
			calls = append(calls, p.call(v))
		}
	}
	return content, calls, true
}

func parseHermes(text string, final bool) (content string, calls []parsedCall, ok bool) {
	k := strings.Index(text, hermesOpen)
	if k < 0 {
		if !final {
			text = text[:len(text)-heldPrefix(text, hermesOpen)]
		}
		return text, nil, true
	}
	content = text[:k]
	p := &partialJSON{s: text, final: final}
	i := k + len(hermesOpen)
	for {
		v, j := p.value(i)
		if p.bad {
			return content, calls, false
		}
		if v == nil {
			break
		}
		calls = append(calls, p.call(v))
		if !v.done {
			break
		}
		j = p.ws(j)
		if !strings.HasPrefix(text[j:], hermesClose) {
			break
		}
		j = p.ws(j + len(hermesClose))
		if !strings.HasPrefix(text[j:], hermesOpen) {
			break
		}
		i = j + len(hermesOpen)
	}
	return content, calls, true
}

// heldPrefix is the length of the longest end of text that begins pat.
func heldPrefix(text, pat string) int {
	for l := min(len(pat)-1, len(text)); l > 0; l-- {
		if strings.HasSuffix(text, pat[:l]) {
			return l
		}
	}
	return 0
}

// call reads a call object: its name and its arguments.
func (p *partialJSON) call(v *pjValue) parsedCall {
	var c parsedCall
	if v == nil || v.kind != '{' {
		return c
	}
	for i, k := range v.keys {
		x := v.vals[i]
		if x == nil {
			continue
		}
		switch k {
		case "name":
			c.name, c.nameDone = x.str, x.done && x.kind == '"'
		case "arguments", "parameters":
			c.args, c.argsDone = compactJSON(p.s[x.start:x.end]), x.done
		}
	}
	return c
}

// compactJSON drops the blanks outside strings: the same JSON, written
// compactly, and a prefix of the whole's when given a prefix.
func compactJSON(s string) string {
	var b strings.Builder
	in, esc := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case in:
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				in = false
			}
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			continue
		case c == '"':
			in = true
		}
		b.WriteByte(c)
	}
	return b.String()
}

// partialJSON reads a JSON text that may stop anywhere: each value says
// where it lies and whether it is whole.
type partialJSON struct {
	s     string
	final bool // no more text will come: a number at the end is whole
	bad   bool // the text is not the start of a JSON text
}

type pjValue struct {
	kind       byte // '{', '[', '"', or 'v' (a number or a literal)
	start, end int
	done       bool
	str        string     // a string's characters, as far as they are whole
	keys       []string   // an object's members whose keys are whole
	vals       []*pjValue // their values (nil: not begun)
	items      []*pjValue // an array's
}

func (p *partialJSON) ws(i int) int {
	for i < len(p.s) && strings.IndexByte(" \t\n\r", p.s[i]) >= 0 {
		i++
	}
	return i
}

// value reads the value at i; nil when the text ends before it.
func (p *partialJSON) value(i int) (*pjValue, int) {
	i = p.ws(i)
	if i >= len(p.s) {
		return nil, i
	}
	v := &pjValue{start: i}
	switch c := p.s[i]; {
	case c == '{' || c == '[':
		v.kind = c
		i++
		for first := true; ; first = false {
			i = p.ws(i)
			if i >= len(p.s) {
				break
			}
			if p.s[i] == c+2 { // '}' or ']'
				v.done = true
				i++
				break
			}
			if !first {
				if p.s[i] != ',' {
					p.bad = true
					break
				}
				if i = p.ws(i + 1); i >= len(p.s) {
					break
				}
			}
			if c == '[' {
				x, j := p.value(i)
				i = j
				if x == nil {
					break
				}
				v.items = append(v.items, x)
				if !x.done || p.bad {
					break
				}
				continue
			}
			if p.s[i] != '"' {
				p.bad = true
				break
			}
			key, j, whole := p.str(i)
			if i = p.ws(j); !whole || i >= len(p.s) {
				break
			}
			if p.s[i] != ':' {
				p.bad = true
				break
			}
			x, j := p.value(i + 1)
			i = j
			v.keys, v.vals = append(v.keys, key), append(v.vals, x)
			if x == nil || !x.done || p.bad {
				break
			}
		}
	case c == '"':
		v.kind = '"'
		v.str, i, v.done = p.str(i)
	default:
		j := i
		for j < len(p.s) && strings.IndexByte("+-.0123456789eEtrufalsn", p.s[j]) >= 0 {
			j++
		}
		if j == i {
			p.bad = true
			return nil, i
		}
		v.kind, v.done, i = 'v', j < len(p.s) || p.final, j
		if v.done && !json.Valid([]byte(p.s[v.start:j])) {
			p.bad = true // tru, 1-2, +1: not a JSON number or literal
			return nil, i
		}
	}
	v.end = i
	return v, i
}

// str reads the string at i: its characters as far as they are whole,
// where it ends, and whether its closing quote was read.
func (p *partialJSON) str(i int) (string, int, bool) {
	var b strings.Builder
	s := p.s
	j := i + 1
	for j < len(s) {
		c := s[j]
		switch {
		case c == '"':
			return b.String(), j + 1, true
		case c != '\\':
			b.WriteByte(c)
			j++
			continue
		}
		if j+1 >= len(s) {
			break
		}
		if e := strings.IndexByte(`"\/bfnrt`, s[j+1]); e >= 0 {
			b.WriteByte("\"\\/\b\f\n\r\t"[e])
			j += 2
			continue
		}
		if s[j+1] != 'u' {
			p.bad = true
			break
		}
		if j+6 > len(s) {
			break
		}
		r, err := strconv.ParseUint(s[j+2:j+6], 16, 32)
		if err != nil {
			p.bad = true
			break
		}
		n := 6
		if utf16.IsSurrogate(rune(r)) {
			if j+12 > len(s) && !p.final && r < 0xdc00 && lowMayFollow(s[j+6:]) {
				break // its other half may come
			}
			r2, err := uint64(0), error(nil)
			if j+12 <= len(s) && s[j+6:j+8] == `\u` {
				r2, err = strconv.ParseUint(s[j+8:j+12], 16, 32)
			}
			if d := utf16.DecodeRune(rune(r), rune(r2)); err == nil && d != '\uFFFD' {
				r, n = uint64(d), 12
			} else {
				r = '\uFFFD'
			}
		}
		b.WriteRune(rune(r))
		j += n
	}
	return b.String(), len(s), false
}

// lowMayFollow says whether rest, shorter than an escape, may still
// become the \uXXXX of a surrogate pair's low half: a high half followed
// by anything else is whole now (U+FFFD), and the string goes on.
func lowMayFollow(rest string) bool {
	for k := range len(rest) {
		c := rest[k]
		switch {
		case k == 0 && c == '\\', k == 1 && c == 'u':
		case k >= 2 && strings.IndexByte("0123456789abcdefABCDEF", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// Answering with the reply's calls.

// toolMessage is OpenAI's message with tool calls: content null when
// there is no text.
type toolMessage struct {
	Role      string     `json:"role"`
	Content   *string    `json:"content"`
	ToolCalls []toolCall `json:"tool_calls,omitempty"`
}

// toolCall is a call in a message (id, type, function) or a stream's
// delta of one (index, and what is new: id, type and name first, then
// pieces of the arguments).
type toolCall struct {
	Index    *int         `json:"index,omitempty"`
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type,omitempty"`
	Function toolFunction `json:"function"`
}

type toolFunction struct {
	Name      string  `json:"name,omitempty"`
	Arguments *string `json:"arguments,omitempty"`
}

// toolFinish is "tool_calls" for a reply that called tools and ended
// by itself, else the reason it ended.
func toolFinish(fin string, called bool) string {
	if fin == finishStop && called {
		return "tool_calls"
	}
	return fin
}

// message parses a whole reply: its calls (those it finished: one cut
// short by max_tokens is left out) and its text, null when it called
// tools and wrote none. A reply that does not parse, which the grammar
// keeps from happening, is its text.
func (tp *toolParser) message(text, fin string) (*toolMessage, string) {
	tp.text.Reset()
	tp.text.WriteString(text)
	content, calls, ok := tp.parse(true)
	if !ok {
		content, calls = text, nil
	}
	m := &toolMessage{Role: "assistant"}
	for i, c := range calls {
		if c.nameDone && c.argsDone {
			args := c.args
			m.ToolCalls = append(m.ToolCalls, toolCall{ID: tp.ids[i], Type: "function", Function: toolFunction{Name: c.name, Arguments: &args}})
		}
	}
	if content != "" || len(m.ToolCalls) == 0 {
		m.Content = &content
	}
	return m, toolFinish(fin, len(m.ToolCalls) > 0)
}

// unparsedRest is, at the end of a reply that is not the format, what a
// stream has yet to send of its text, which the whole reply's answer
// (message, ollamaMessage) gives as its content: only when no call was
// sent and the content sent, if any, was the text's beginning (the
// Hermes format's text before "<tool_call>").
func (tp *toolParser) unparsedRest(final bool, sentCalls int) (string, bool) {
	text := tp.text.String()
	if !final || sentCalls > 0 || tp.sentContent > 0 && !tp.plan.hermes || len(text) <= tp.sentContent {
		return "", false
	}
	s := text[tp.sentContent:]
	tp.sentContent = len(text)
	return s, true
}

// advance adds the next piece of the reply and parses the text so far:
// text is the content the stream has yet to send, calls the calls so far,
// ok whether the text is the format. When it is not, text is the reply's
// rest once final (unparsedRest; sent counts the calls the stream gave).
func (tp *toolParser) advance(piece string, final bool, sent int) (text string, calls []parsedCall, ok bool) {
	tp.text.WriteString(piece)
	content, calls, ok := tp.parse(final)
	if !ok {
		text, _ = tp.unparsedRest(final, sent)
		return text, nil, false
	}
	if len(content) > tp.sentContent {
		text = content[tp.sentContent:]
		tp.sentContent = len(content)
	}
	return text, calls, true
}

// deltas takes the next piece of the reply and returns the stream's
// deltas it makes: text, a call's start (index, id, type, name, and ""
// for arguments, as llama-server's), pieces of a call's arguments. final
// (with the last piece, or none) lets go of what was held back.
func (tp *toolParser) deltas(piece string, final bool) []*chatOut {
	s, calls, ok := tp.advance(piece, final, tp.sentCalls)
	var out []*chatOut
	if s != "" {
		out = append(out, &chatOut{Content: &s})
	}
	if !ok {
		return out
	}
	for i, c := range calls {
		if !c.nameDone {
			break
		}
		if i >= tp.sentCalls {
			empty := ""
			out = append(out, &chatOut{ToolCalls: []toolCall{{Index: &i, ID: tp.ids[i], Type: "function", Function: toolFunction{Name: c.name, Arguments: &empty}}}})
			tp.sentCalls++
			tp.sentArgs = append(tp.sentArgs, 0)
		}
		if len(c.args) > tp.sentArgs[i] {
			a := c.args[tp.sentArgs[i]:]
			tp.sentArgs[i] = len(c.args)
			out = append(out, &chatOut{ToolCalls: []toolCall{{Index: &i, Function: toolFunction{Arguments: &a}}}})
		}
	}
	return out
}

// ollamaToolCall is a call in ollama's message: its arguments an object.
type ollamaToolCall struct {
	Function struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

// ollamaCalls is the calls of the reply so far that are whole, from the
// first not yet given.
func (tp *toolParser) ollamaCalls(calls []parsedCall, from int) []ollamaToolCall {
	var out []ollamaToolCall
	for _, c := range calls[min(from, len(calls)):] {
		if !c.nameDone || !c.argsDone || !json.Valid([]byte(c.args)) {
			break
		}
		var oc ollamaToolCall
		oc.Function.Name, oc.Function.Arguments = c.name, json.RawMessage(c.args)
		out = append(out, oc)
	}
	return out
}

// ollamaDeltas is deltas for ollama's stream: messages of text, and of
// each call once it is whole.
func (tp *toolParser) ollamaDeltas(piece string, final bool) []*ollamaOut {
	s, calls, ok := tp.advance(piece, final, tp.ollamaSent)
	var out []*ollamaOut
	if s != "" {
		out = append(out, &ollamaOut{Role: "assistant", Content: s})
	}
	if !ok {
		return out
	}
	if whole := tp.ollamaCalls(calls, tp.ollamaSent); len(whole) > 0 {
		tp.ollamaSent += len(whole)
		out = append(out, &ollamaOut{Role: "assistant", ToolCalls: whole})
	}
	return out
}

// ollamaMessage parses a whole reply for ollama's answer.
func (tp *toolParser) ollamaMessage(text string) *ollamaOut {
	tp.text.Reset()
	tp.text.WriteString(text)
	content, calls, ok := tp.parse(true)
	if !ok {
		return &ollamaOut{Role: "assistant", Content: text}
	}
	return &ollamaOut{Role: "assistant", Content: content, ToolCalls: tp.ollamaCalls(calls, 0)}
}

// ollamaTools reads /api/chat's tools (ollama's have OpenAI's shape, and
// no tool_choice: the model calls one if it likes, as the OpenAI side's
// default allows); format then constrains the generic format's response.
func (s *Server) ollamaTools(g *genParams, tools []json.RawMessage, format json.RawMessage) (*toolPlan, *apiError) {
	p, e := parseTools(toolRequest{tools: tools})
	if e != nil || !p.active() {
		return p, e
	}
	var resp json.RawMessage
	var str string
	switch {
	case !present(format):
	case json.Unmarshal(format, &str) == nil:
		if str == "json" {
			resp = json.RawMessage(`{"type":"object"}`)
		}
	default:
		resp = format
	}
	return p, s.toolGrammar(g, p, resp, "format")
}
