package server

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// --chat-template-file's template replaces the file's: the prompt the chat
// decodes is that template's rendering; a template that does not parse
// fails the start, naming the flag.
func TestChatTemplateOverride(t *testing.T) {
	const tpl = "{% for m in messages %}[{{ m.role | upper }}] {{ m.content }}\n{% endfor %}[ASSISTANT]"
	_, url := start(t, Config{ChatTemplate: tpl})
	code, out := post(t, url+"/v1/chat/completions", `{"messages":[{"role":"system","content":"Speak."},{"role":"user","content":"Who art thou?"}],"max_tokens":2,"temperature":0}`)
	require.Equal(t, 200, code, out)
	want := EncodeChat(builtin(t).Tok, "[SYSTEM] Speak.\n[USER] Who art thou?\n[ASSISTANT]")
	require.Equal(t, float64(len(want)), out["usage"].(map[string]any)["prompt_tokens"])

	_, err := New(builtin(t), Config{ChatTemplate: "{% for m in messages %}"})
	require.ErrorContains(t, err, "--chat-template-file")
}
