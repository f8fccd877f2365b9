package server

import (
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

// Mistral-7B-Instruct-v0.3's tokenizer_config.json chat_template, verbatim.
const mistralV03Template = `{%- if messages[0]["role"] == "system" %}
    {%- set system_message = messages[0]["content"] %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set loop_messages = messages %}
{%- endif %}
{%- if not tools is defined %}
    {%- set tools = none %}
{%- endif %}
{%- set user_messages = loop_messages | selectattr("role", "equalto", "user") | list %}

{#- This block checks for alternating user/assistant messages, skipping tool calling messages #}
{%- set ns = namespace() %}
{%- set ns.index = 0 %}
{%- for message in loop_messages %}
    {%- if not (message.role == "tool" or message.role == "tool_results" or (message.tool_calls is defined and message.tool_calls is not none)) %}
        {%- if (message["role"] == "user") != (ns.index % 2 == 0) %}
            {{- raise_exception("After the optional system message, conversation roles must alternate user/assistant/user/assistant/...") }}
        {%- endif %}
        {%- set ns.index = ns.index + 1 %}
    {%- endif %}
{%- endfor %}

{{- bos_token }}
{%- for message in loop_messages %}
    {%- if message["role"] == "user" %}
        {%- if tools is not none and (message == user_messages[-1]) %}
            {{- "[AVAILABLE_TOOLS] [" }}
            {%- for tool in tools %}
                {%- set tool = tool.function %}
                {{- '{"type": "function", "function": {' }}
                {%- for key, val in tool.items() if key != "return" %}
                    {%- if val is string %}
                        {{- '"' + key + '": "' + val + '"' }}
                    {%- else %}
                        {{- '"' + key + '": ' + val|tojson }}
                    {%- endif %}
                    {%- if not loop.last %}
                        {{- ", " }}
                    {%- endif %}
                {%- endfor %}
                {{- "}}" }}
                {%- if not loop.last %}
                    {{- ", " }}
                {%- else %}
                    {{- "]" }}
                {%- endif %}
            {%- endfor %}
            {{- "[/AVAILABLE_TOOLS]" }}
            {%- endif %}
        {%- if loop.last and system_message is defined %}
            {{- "[INST] " + system_message + "\n\n" + message["content"] + "[/INST]" }}
        {%- else %}
            {{- "[INST] " + message["content"] + "[/INST]" }}
        {%- endif %}
    {%- elif message.tool_calls is defined and message.tool_calls is not none %}
        {{- "[TOOL_CALLS] [" }}
        {%- for tool_call in message.tool_calls %}
            {%- set out = tool_call.function|tojson %}
            {{- out[:-1] }}
            {%- if not tool_call.id is defined or tool_call.id|length != 9 %}
                {{- raise_exception("Tool call IDs should be alphanumeric strings with length 9!") }}
            {%- endif %}
            {{- ', "id": "' + tool_call.id + '"}' }}
            {%- if not loop.last %}
                {{- ", " }}
            {%- else %}
                {{- "]" + eos_token }}
            {%- endif %}
        {%- endfor %}
    {%- elif message["role"] == "assistant" %}
        {{- " " + message["content"]|trim + eos_token}}
    {%- elif message["role"] == "tool_results" or message["role"] == "tool" %}
        {%- if message.content is defined and message.content.content is defined %}
            {%- set content = message.content.content %}
        {%- else %}
            {%- set content = message.content %}
        {%- endif %}
        {{- '[TOOL_RESULTS] {"content": ' + content|string + ", " }}
        {%- if not message.tool_call_id is defined or message.tool_call_id|length != 9 %}
            {{- raise_exception("Tool call IDs should be alphanumeric strings with length 9!") }}
        {%- endif %}
        {{- '"call_id": "' + message.tool_call_id + '"}[/TOOL_RESULTS]' }}
    {%- else %}
        {{- raise_exception("Only user and assistant roles are supported, with the exception of an initial optional system message!") }}
    {%- endif %}
{%- endfor %}
`

// Mistral's published v3 format: "<s>[INST] user[/INST] assistant</s>...",
// the system prompt joined to the last user turn by a blank line.
func TestTemplateMistralV03(t *testing.T) {
	got := render(t, mistralV03Template, conv("system", "Be brief.", "user", "Hello", "assistant", " Hi there ", "user", "How are you?"))
	require.Equal(t, "<s>[INST] Hello[/INST] Hi there</s>[INST] Be brief.\n\nHow are you?[/INST]", got)
	require.Equal(t, "<s>[INST] Hello[/INST]", render(t, mistralV03Template, conv("user", "Hello")))

	tpl, err := ParseTemplate(mistralV03Template)
	require.NoError(t, err)
	_, err = tpl.Render(map[string]any{"messages": conv("user", "a", "user", "b"), "bos_token": "<s>", "eos_token": "</s>"})
	require.ErrorAs(t, err, new(*raised))
	require.EqualError(t, err, "After the optional system message, conversation roles must alternate user/assistant/user/assistant/...")
}

// Other published templates and the prompts their model cards document.
func TestTemplatePublished(t *testing.T) {
	const llama3 = `{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}`
	got := render(t, llama3, conv("system", "Be brief.", "user", "Hello"), map[string]any{"bos_token": "<|begin_of_text|>"})
	require.Equal(t, "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n", got)

	got = render(t, gemmaTemplate, conv("user", "Hello", "assistant", "Hi", "user", "Bye"), map[string]any{"bos_token": "<bos>"})
	require.Equal(t, "<bos><start_of_turn>user\nHello<end_of_turn>\n<start_of_turn>model\nHi<end_of_turn>\n<start_of_turn>user\nBye<end_of_turn>\n<start_of_turn>model\n", got)

	const qwen2 = `{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}`
	got = render(t, qwen2, conv("user", "Hello"))
	require.Equal(t, "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n", got)

	// Mistral NeMo / Large 2 check alternation over a filtered list.
	const nemo = `{%- for message in messages | rejectattr("role", "equalto", "tool") | rejectattr("role", "equalto", "tool_results") | selectattr("tool_calls", "undefined") %}{%- if (message["role"] == "user") != (loop.index0 % 2 == 0) %}{{- raise_exception("roles must alternate") }}{%- endif %}{{ message.role[0] }}{%- endfor %}`
	msgs := conv("user", "a", "tool", "r", "assistant", "b", "user", "c")
	msgs = append(msgs, map[string]any{"role": "assistant", "tool_calls": []any{}}, map[string]any{"role": "assistant", "content": "d"})
	require.Equal(t, "uaua", render(t, nemo, msgs))
}

// Gemma's published template: no system role, alternation enforced.
const gemmaTemplate = `{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if (message['role'] == 'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}{% endif %}{{ '<start_of_turn>' + role + '\n' + message['content'] | trim + '<end_of_turn>\n' }}{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model\n'}}{% endif %}`

// Each expected value is what Jinja2 (3.1) renders.
func TestTemplateFilters(t *testing.T) {
	xs := []any{
		map[string]any{"n": "b", "v": 2},
		map[string]any{"n": "A", "v": 1},
		map[string]any{"n": "c"},
		map[string]any{"n": "d", "v": 0},
		map[string]any{"n": "e", "v": nil},
	}
	msgs := conv("system", "S", "user", "a", "assistant", "b", "user", "c")
	for src, want := range map[string]string{
		`{{ messages | selectattr('role', 'equalto', 'user') | map(attribute='content') | join(',') }}`:                "a,c",
		`{{ messages | rejectattr('role', 'equalto', 'user') | map(attribute='content') | list }}`:                     "['S', 'b']",
		`{{ messages | selectattr('role', '==', 'user') | list | length }}`:                                            "2",
		`{{ xs | selectattr('v') | map(attribute='n') | join }}`:                                                       "bA",
		`{{ xs | rejectattr('v') | map(attribute='n') | join }}`:                                                       "cde",
		`{{ xs | selectattr('v', 'defined') | map(attribute='n') | join }}`:                                            "bAde",
		`{{ xs | selectattr('v', 'undefined') | map(attribute='n') | join }}`:                                          "c",
		`{{ xs | selectattr('v', 'none') | map(attribute='n') | join }}`:                                               "e",
		`{{ xs | selectattr('n', 'string') | list | length }}`:                                                         "5",
		`{{ xs | selectattr('v', 'equalto', 2) | map(attribute='n') | join }}`:                                         "b",
		`{{ [1, 0, 2, none] | select | list }}|{{ [1, 0, 2, none] | reject | list }}`:                                  "[1, 2]|[0, None]",
		`{{ [1, 2, 3, 4] | select('odd') | list }}`:                                                                    "[1, 3]",
		`{{ xs | map(attribute='v', default=9) | list }}`:                                                              "[2, 1, 9, 0, None]",
		`{{ ['a', 'b'] | map('upper') | join }}{{ [' a ', 'b '] | map('trim') | join('-') }}`:                          "ABa-b",
		`{{ [1, 2, 3] | reverse | join }} {{ 'abc' | reverse }} {{ (messages | reverse | first).content }}`:            "321 cba c",
		`{{ '42' | int + 1 }} {{ ' -4.7 ' | int }} {{ 3.9 | int }} {{ 'x' | int }} {{ 'x' | int(7) }}`:                 "43 -4 3 0 7",
		`{{ 'ff' | int(base=16) }} {{ true | int }} {{ none | int }}`:                                                  "255 1 0",
		`{{ ['b', 'a', 'C'] | sort | join }} {{ ['b', 'a', 'C'] | sort(case_sensitive=true) | join }}`:                 "abC Cab",
		`{{ [3, 1, 2] | sort(reverse=true) | join }} {{ [2, 1.5, true] | sort | list }}`:                               "321 [True, 1.5, 2]",
		`{{ xs | sort(attribute='n') | map(attribute='n') | join }}`:                                                   "Abcde",
		`{{ '%s-%d|%5.2f|%-3s|%%|%r' | format('a', 7.9, 3.14159, 'x', 'q') }}`:                                         "a-7| 3.14|x  |%|'q'",
		`{{ "%s" | format([1, 'a']) }} {{ '%03d %x' | format(5, 255) }}`:                                               "[1, 'a'] 005 ff",
		`{% for k, v in {'a': 1, 'b': 2} | items %}{{ k }}={{ v }};{% endfor %}{{ nothing | items | list }}`:           "a=1;b=2;[]",
		`{{ 'aaa' | replace('a', 'b', 2) }} {{ 'hello' | replace('l', 'L') }} {{ 'aaa'.replace('a', 'c', 1) }}`:        "bba heLLo caa",
		`{{ nothing | length }} {{ xs | join(',', attribute='n') }}`:                                                   "0 b,A,c,d,e",
		`{{ '' | default('x', true) }}{{ '' | default('y', boolean=true) }}{{ '' | default('z') }}|{{ nothing | d }}|`: "xy||",
		`{{ xs | first | tojson }} {{ xs | last }} {{ 'AbC' | lower }}{{ 'AbC' | upper }}`:                             `{"n": "b", "v": 2} {'n': 'e', 'v': None} abcABC`,
		// Mistral v0.3 compares messages (message == user_messages[-1]).
		`{{ {'a': [1]} == {'a': [1]} }} {{ {'a': 1} == {'a': 2} }} {{ messages[1] == messages[3] }}`: "True False False",
	} {
		require.Equal(t, want, render(t, src, msgs, map[string]any{"xs": xs}), src)
	}

	for src, msg := range map[string]string{
		`{{ [1, 'a'] | sort }}`:            "cannot compare",
		`{{ '%s %s' | format(1) }}`:        "not enough arguments",
		`{{ '%s' | format(1, 2) }}`:        "not all arguments converted",
		`{{ '%d' | format('a') }}`:         "%d format: a number is required, not a string",
		`{{ '%99999s' | format('a') }}`:    "format: width or precision over 9999",
		`{{ [1] | selectattr }}`:           "selectattr needs an attribute name",
		`{{ [1] | map }}`:                  "map needs a filter name or attribute=",
		`{{ [1] | select('nosuchtest') }}`: `unknown test "nosuchtest"`,
		`{{ 1 | items }}`:                  "items: a number is not a mapping",
	} {
		tpl, err := ParseTemplate(src)
		require.NoError(t, err, src)
		_, err = tpl.Render(map[string]any{})
		require.ErrorContains(t, err, msg, src)
	}
}

// A template that fails is the model's fault (500, naming the template); one
// that refuses the conversation with raise_exception is the client's (400).
func TestTemplateErrorStatus(t *testing.T) {
	s, err := New(builtin(t), Config{Threads: 2})
	require.NoError(t, err)
	s.chat.tpl, err = ParseTemplate(`{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}{{ messages | nofilter }}`)
	require.NoError(t, err)
	hs := httptest.NewServer(s)
	t.Cleanup(func() {
		hs.Close()
		s.Close()
	})

	status, out := post(t, hs.URL+"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}]}`)
	require.Equal(t, 500, status, out)
	e := out["error"].(map[string]any)
	require.Equal(t, "server_error", e["type"])
	require.Equal(t, "chat_template_error", e["code"])
	require.Contains(t, e["message"], "tokenizer.chat_template")
	require.Contains(t, e["message"], `unknown filter "nofilter"`)

	status, out = post(t, hs.URL+"/v1/chat/completions", `{"messages":[{"role":"system","content":"s"},{"role":"user","content":"hi"}]}`)
	require.Equal(t, 400, status, out)
	e = out["error"].(map[string]any)
	require.Equal(t, "invalid_conversation", e["code"])
	require.Equal(t, "System role not supported", e["message"])
}
