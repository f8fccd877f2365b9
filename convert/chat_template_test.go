package convert

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/pinfer/pinfer/ops"
	"github.com/stretchr/testify/require"
)

// chatML is Qwen2's template, a stand-in for any instruct model's.
const chatML = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"

// The checkpoint's chat template reaches the GGUF as llama.cpp's converter
// writes it: tokenizer_config.json's chat_template (a string, or a list whose
// "default" entry it is, the others under tokenizer.chat_template.<name>),
// and chat_template.jinja ahead of it, as transformers reads them.
func TestConvertChatTemplate(t *testing.T) {
	src := filepath.Join(sharedModels(t), "shakespeare-relu-6m")
	dir := copyModel(t, src, nil, nil)
	convert := func() string {
		t.Helper()
		out := filepath.Join(t.TempDir(), "m.gguf")
		require.NoError(t, Convert(dir, out, Options{Type: ops.F16}))
		return out
	}
	writeConfig := func(tmpl any) {
		t.Helper()
		raw, err := json.Marshal(map[string]any{"bos_token": "<s>", "chat_template": tmpl, "model_max_length": 512})
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), raw, 0o644))
	}

	// No tokenizer_config.json: no template, as before.
	f := openGGUF(t, convert())
	require.False(t, f.Has("tokenizer.chat_template"))

	writeConfig(chatML)
	f = openGGUF(t, convert())
	require.Equal(t, chatML, str(t, f, "tokenizer.chat_template"))
	require.False(t, f.Has("tokenizer.chat_templates"))

	writeConfig([]any{
		map[string]any{"name": "tool use", "template": "T"},
		map[string]any{"name": "default", "template": chatML},
		map[string]any{"name": "rag", "template": "R"},
	})
	f = openGGUF(t, convert())
	require.Equal(t, chatML, str(t, f, "tokenizer.chat_template"))
	require.Equal(t, "T", str(t, f, "tokenizer.chat_template.tool_use"))
	require.Equal(t, "R", str(t, f, "tokenizer.chat_template.rag"))
	names, err := f.Strings("tokenizer.chat_templates")
	require.NoError(t, err)
	require.Equal(t, []string{"tool_use", "rag"}, names)

	require.NoError(t, os.WriteFile(filepath.Join(dir, "chat_template.jinja"), []byte("{{ messages[0]['content'] }}\n"), 0o644))
	f = openGGUF(t, convert())
	require.Equal(t, "{{ messages[0]['content'] }}\n", str(t, f, "tokenizer.chat_template"))
	require.False(t, f.Has("tokenizer.chat_template.tool_use"))

	require.NoError(t, os.Remove(filepath.Join(dir, "chat_template.jinja")))
	writeConfig(42)
	require.ErrorContains(t, Convert(dir, filepath.Join(t.TempDir(), "m.gguf"), Options{}), "tokenizer_config.json: chat_template")
}
