package server

import (
	"testing"
	"time"
)

// FuzzTemplate: a chat template comes from the model file, so any source
// either fails to parse or renders with an error or a result, without a
// panic, and in bounded time and memory (a template may not ask for a
// billion-item range or a gigabyte string).
func FuzzTemplate(f *testing.F) {
	for _, s := range []string{
		chatMLTemplate,
		llama2Template,
		`{%- set ns = namespace(sys='none') -%}{% for m in messages %}{% if m.role == 'system' %}{% set ns.sys = m.content %}{% endif %}{% endfor %}{{ ns.sys }}`,
		`{% for i in range(3) %}{{ i }}{% else %}empty{% endfor %}{{ "it's".replace("'", '"') }}{{ 'a,b'.split(',')[1] }}`,
		`{{ 'ab' * 3 }}{{ messages[0]['content'][1:3] | upper }}{{ raise_exception('no') if false }}`,
		`{% for m in messages %}{{ loop.index }}{{ m.role | trim }}{% endfor %}{{ messages | length }}`,
		mistralV03Template,
		`{{ messages | rejectattr('role', 'equalto', 'system') | map(attribute='content') | sort(reverse=true) | join(',') }}{{ '%5.1f|%-4s' | format('7' | int, 'x') }}{{ messages | reverse | selectattr('name', 'undefined') | list }}`,
	} {
		f.Add(s)
	}
	vars := func() map[string]any {
		return map[string]any{"messages": conv("system", "be brief", "user", "hi", "assistant", "hello"),
			"bos_token": "<s>", "eos_token": "</s>", "add_generation_prompt": true}
	}
	f.Fuzz(func(t *testing.T, src string) {
		tpl, err := ParseTemplate(src)
		if err != nil {
			return
		}
		start := time.Now()
		out, err := tpl.Render(vars())
		if err == nil && len(out) > maxTemplateBytes {
			t.Fatalf("rendered %d bytes, over the %d limit", len(out), maxTemplateBytes)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("rendering took %v", d)
		}
	})
}
