package server

import (
	"strings"
	"testing"

	"github.com/pinfer/pinfer/gguf"
	"github.com/pinfer/pinfer/internal/fixtures"
	"github.com/pinfer/pinfer/tokenizer"
	"github.com/stretchr/testify/require"
)

func conv(pairs ...string) []any {
	var out []any
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, map[string]any{"role": pairs[i], "content": pairs[i+1]})
	}
	return out
}

func render(t *testing.T, src string, msgs []any, extra ...map[string]any) string {
	t.Helper()
	tpl, err := ParseTemplate(src)
	require.NoError(t, err)
	vars := map[string]any{"messages": msgs, "bos_token": "<s>", "eos_token": "</s>", "add_generation_prompt": true}
	for _, e := range extra {
		for k, v := range e {
			vars[k] = v
		}
	}
	out, err := tpl.Render(vars)
	require.NoError(t, err)
	return out
}

func phi3(t *testing.T) *gguf.File {
	f, err := gguf.Open(fixtures.Path(t, "vocab-phi-3", "ggml-vocab-phi-3.gguf"))
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	return f
}

// The Phi-3 file's own template: BOS, then <|user|>/<|assistant|> turns
// each closed by <|end|>; it has no branch for system messages, so they
// vanish.
func TestTemplatePhi3Fixture(t *testing.T) {
	src, err := phi3(t).String("tokenizer.chat_template")
	require.NoError(t, err)
	got := render(t, src, conv("system", "Be brief.", "user", "Hello", "assistant", "Hi there", "user", "How are you?"))
	require.Equal(t, "<s><|user|>\nHello<|end|>\n<|assistant|>\nHi there<|end|>\n<|user|>\nHow are you?<|end|>\n<|assistant|>\n", got)
}

// Llama 2's published template: system prompt folded into the first user
// turn, .strip(), alternation enforced with raise_exception.
const llama2Template = `{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\n' + system_message + '\n<</SYS>>\n\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}`

func TestTemplateLlama2(t *testing.T) {
	got := render(t, llama2Template, conv("system", "Be brief.", "user", "Hi", "assistant", " Hello! ", "user", "Bye"))
	require.Equal(t, "<s>[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi [/INST] Hello! </s><s>[INST] Bye [/INST]", got)

	got = render(t, llama2Template, conv("user", "  Hi  "))
	require.Equal(t, "<s>[INST] Hi [/INST]", got)

	tpl, err := ParseTemplate(llama2Template)
	require.NoError(t, err)
	_, err = tpl.Render(map[string]any{"messages": conv("user", "a", "user", "b"), "bos_token": "<s>"})
	require.EqualError(t, err, "Conversation roles must alternate user/assistant/user/assistant/...")
}

// "{%-" / "-%}" / "{{-" strip whitespace; the filter binds tighter than "+".
const chatMLTemplate = `{%- for message in messages %}
    {%- if loop.first and message.role != 'system' %}
        {{- '<|im_start|>system\nYou are helpful.<|im_end|>\n' }}
    {%- endif %}
    {{- '<|im_start|>' + message.role + '\n' + message.content | trim + '<|im_end|>' + '\n' }}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
{%- endif %}
`

func TestTemplateWhitespaceControl(t *testing.T) {
	got := render(t, chatMLTemplate, conv("user", " Hi "))
	require.Equal(t, "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n", got)
	got = render(t, chatMLTemplate, conv("system", "S", "user", "U"), map[string]any{"add_generation_prompt": false})
	require.Equal(t, "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n", got)
}

// Without "-", block tags alone on their lines leave nothing behind
// (trim_blocks drops the newline after, lstrip_blocks the indent before).
func TestTemplateTrimAndLstripBlocks(t *testing.T) {
	src := "{% for m in messages %}\n  {% if m.role == 'user' %}\nU: {{ m.content }}\n  {% else %}\nA: {{ m.content }}\n  {% endif %}\n{% endfor %}\n"
	require.Equal(t, "U: hi\nA: yo\n", render(t, src, conv("user", "hi", "assistant", "yo")))
	// An output tag keeps its indent and newline.
	require.Equal(t, "  x\n", render(t, "  {{ 'x' }}\n", nil))
	// A block tag after other text on its line keeps the spaces before it.
	require.Equal(t, "a  b", render(t, "a  {% if true %}b{% endif %}", nil))
}

func TestTemplateExpressions(t *testing.T) {
	src := `{%- set ns = namespace(sys='none') -%}
{%- for m in messages -%}{%- if m.role == 'system' -%}{%- set ns.sys = m.content -%}{%- endif -%}{%- endfor -%}
[{{ ns.sys }}]{% for m in messages if m.role != 'system' %}{{ loop.index }}:{{ m.content | upper }}{% if not loop.last %},{% endif %}{% endfor %}
{{ messages | length }} {{ messages[0].name is defined }} {{ messages[-1]['content'] }} {{ 'x' ~ 3 }} {{ 7 // 2 }} {{ -7 % 3 }} {{ 'ab' if 1 > 2 else 'cd' }}
{{ 'user' in ['user', 'assistant'] }} {{ messages[0] is mapping }} {{ undefined_name | default('dflt') }} {{ ['a', 'b'] | join('-') }} {{ {'k': [1, 'v']} | tojson }}
{% for i in range(3) %}{{ i }}{% else %}empty{% endfor %} {% for i in [] %}{{ i }}{% else %}empty{% endfor %} {{ "it's".replace("'", '"') }} {{ '  pad '.rstrip() }}|{{ 'a,b'.split(',')[1] }}`
	got := render(t, src, conv("system", "S", "user", "a", "assistant", "b"))
	want := "[S]1:A,2:B3 False b x3 3 2 cd\nTrue True dflt a-b {\"k\": [1, \"v\"]}\n012 empty it\"s   pad|b"
	require.Equal(t, want, got)
}

func TestTemplateDefault(t *testing.T) {
	got := render(t, DefaultChatTemplate, conv("system", "Be kind.", "user", "Who art thou?"))
	require.Equal(t, "system: Be kind.\nuser: Who art thou?\nassistant:", got)
	// A reply keeps the space it was generated with, and gets no other.
	got = render(t, DefaultChatTemplate, conv("user", "Who art thou?", "assistant", " A friend.", "user", "Speak."))
	require.Equal(t, "user: Who art thou?\nassistant: A friend.\nuser: Speak.\nassistant:", got)
}

func TestTemplateErrors(t *testing.T) {
	for src, msg := range map[string]string{
		"{% for m in messages %}x":          "line 1: {% for %} is not closed",
		"{% if x %}a{% endfor %}":           "line 1: endfor inside an if opened on line 1",
		"{% macro f() %}{% endmacro %}":     `line 1: unsupported statement "macro"`,
		"{{ 'abc }}":                        "line 1: string is not closed",
		"a\n{{ x + }}":                      "line 2: expression ends too soon",
		"{% endif %}":                       "line 1: unexpected {% endif %}",
		"{{ x }":                            `line 1: tag is not closed by "}}"`,
		"{# note":                           "line 1: comment is not closed",
		"{% set x %}":                       `line 1: set: want "=" (block set is not supported)`,
		"{{ a $ b }}":                       `line 1: unexpected character '$'`,
		"{{ messages[0]['content'] + 1 }}x": "",
	} {
		_, err := ParseTemplate(src)
		if msg == "" {
			require.NoError(t, err, src)
			continue
		}
		require.EqualError(t, err, msg, src)
	}
	for src, msg := range map[string]string{
		"{{ 'a' + 1 }}":                     `chat template: cannot apply "+" to a string and a number`,
		"{{ x | nofilter }}":                `chat template: unknown filter "nofilter"`,
		"{{ nofunc() }}":                    "chat template: unknown function nofunc()",
		"{{ 1 // 0 }}":                      "chat template: division by zero",
		"{% for a, b in [1] %}{% endfor %}": "chat template: for a, b: cannot unpack 1",
	} {
		tpl, err := ParseTemplate(src)
		require.NoError(t, err, src)
		_, err = tpl.Render(map[string]any{})
		require.EqualError(t, err, msg, src)
	}
}

// Control-token text in a rendered prompt becomes those tokens; the text
// between is encoded as usual (ids from llama.cpp's vocabulary test for
// "Hello world"), and BOS is not doubled when the template writes it.
func TestEncodeChatSpecials(t *testing.T) {
	tok, err := tokenizer.FromGGUF(phi3(t))
	require.NoError(t, err)
	v := tok.Vocab()
	require.Equal(t, "<|user|>", v.Tokens[32010])
	require.Equal(t, "<|end|>", v.Tokens[32007])
	require.Equal(t, "<|assistant|>", v.Tokens[32001])
	want := []int{1, 32010, 15043, 3186, 32007, 32001}
	require.Equal(t, want, EncodeChat(tok, "<s><|user|>Hello world<|end|><|assistant|>"))
	require.Equal(t, want, EncodeChat(tok, "<|user|>Hello world<|end|><|assistant|>"))
	// Without control tokens: exactly what a plain prompt gives.
	require.Equal(t, []int{1, 15043, 3186}, EncodeChat(tok, "Hello world"))
	// Phi-3's template puts a newline after each special token, which
	// llama.cpp drops (its rstrip): these are llama-tokenize's ids.
	require.Equal(t, []int{1, 32010, 317, 21554, 13, 17628, 32007, 32001}, EncodeChat(tok, "<|user|>\nSYS\nHI<|end|>\n<|assistant|>\n"))
}

// A template comes from the model file: one that asks for too much fails
// with an error, without a panic, a crash or gigabytes of memory, and a long
// conversation still renders.
func TestTemplateLimits(t *testing.T) {
	for src, want := range map[string]string{
		`{{ 'ab' * 9223372036854775807 }}`:                                                                 "a string of more than 16777216 bytes",
		`{{ 'ab' * 4000000000 }}`:                                                                          "a string of more than 16777216 bytes",
		`{{ 'abc'.replace('', 'x' * 10000000) }}`:                                                          "replace: a string of more than",
		`{{ range(100000000) | length }}`:                                                                  "range() of more than 1048576 items",
		`{{ range(-9223372036854775807, 9223372036854775807, 3) | length }}`:                               "range() of more than 1048576 items",
		`{% set ns = namespace(a=1) %}{% set ns.x = ns %}{{ ns }}`:                                         "set ns.x: a value nests more than 256 deep",
		`{% set ns = namespace(l=[1]) %}{% for i in range(40) %}{% set ns.l = ns.l + ns.l %}{% endfor %}`:  "a list of more than 1048576 items",
		`{% set ns = namespace(s='ab') %}{% for i in range(40) %}{% set ns.s = ns.s + ns.s %}{% endfor %}`: "a value of more than 16777216 bytes",
		`{% set ns = namespace(s='x' * 9000000) %}{{ ns.s }}{{ ns.s }}`:                                    "writes more than 16777216 bytes",
		`{% for i in range(1048576) %}{% for j in range(1048576) %}{% endfor %}{% endfor %}`:               "takes more than 4194304 steps",
		`{{ ('x' * 20000).split('') | length }}{{ ('x' * 2000000).split('x') | length }}`:                  "split: more than 1048576 parts",
		// A namespace put in a list a million times, then grown: printing the
		// list stops at the limit (it ran out of memory).
		`{% set ns = namespace(s='') %}{% set ns2 = namespace(l=[ns]) %}{% for i in range(20) %}{% set ns2.l = ns2.l + ns2.l %}{% endfor %}{% set ns.s = 'x' * 1000000 %}{{ (ns2.l ~ '') | length }}`: "a value of more than 16777216 bytes",
		`{% set ns = namespace(s='') %}{% set ns2 = namespace(l=[ns]) %}{% for i in range(20) %}{% set ns2.l = ns2.l + ns2.l %}{% endfor %}{% set ns.s = 'x' * 1000000 %}{{ ns2.l }}`:                 "writes more than 16777216 bytes",
		`{% set ns = namespace(s='') %}{% set ns2 = namespace(l=[ns]) %}{% for i in range(20) %}{% set ns2.l = ns2.l + ns2.l %}{% endfor %}{% set ns.s = 'x' * 1000000 %}{{ ns2.l | tojson }}`:        "tojson: more than 16777216 bytes",
		strings.Repeat("(", 300) + "1" + strings.Repeat(")", 300):              "nested more than 256 deep",
		"{{ " + strings.Repeat("not ", 300) + "1 }}":                           "nested more than 256 deep",
		"{{ " + strings.Repeat("- ", 300) + "1 }}":                             "nested more than 256 deep",
		strings.Repeat("{% if 1 %}", 300) + strings.Repeat("{% endif %}", 300): "blocks nested more than 256 deep",
	} {
		if !strings.HasPrefix(src, "{") {
			src = "{{ " + src + " }}"
		}
		tpl, err := ParseTemplate(src)
		if err == nil {
			_, err = tpl.Render(map[string]any{})
		}
		require.Error(t, err, src[:min(len(src), 80)])
		require.Contains(t, err.Error(), want, src[:min(len(src), 80)])
	}

	var pairs []string
	for i := range 2000 {
		pairs = append(pairs, "user", strings.Repeat("q", i%500), "assistant", strings.Repeat("a", 300))
	}
	out := render(t, chatMLTemplate, conv(pairs...))
	require.Greater(t, len(out), 1_000_000)
}
