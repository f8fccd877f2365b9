package server

import (
	"strings"

	"github.com/pinfer/pinfer/engine"
	"github.com/pinfer/pinfer/tokenizer"
)

// DefaultChatTemplate is used when the model file has no
// tokenizer.chat_template: one "role: content" line per message, then
// "assistant:" for the reply. A reply begins with the space its first
// token carries, so it gets no second one: a conversation sent back renders
// the text the model saw and wrote, and its cache is reused whole.
const DefaultChatTemplate = "{% for message in messages %}{{ message['role'] + ':' }}" +
	"{% if not message['content'].startswith(' ') %}{{ ' ' }}{% endif %}{{ message['content'] + '\\n' }}{% endfor %}" +
	"{% if add_generation_prompt %}{{ 'assistant:' }}{% endif %}"

// ChatMessage is one message of a chat request, its content already flat text.
type ChatMessage struct {
	Role    string
	Content string
	Name    string
	// An assistant message's tool calls; a tool message's call (tools.go).
	ToolCalls  []ToolCall
	ToolCallID string
}

// Chat turns conversations into prompts for one model.
type Chat struct {
	tpl      *Template
	bos, eos string
	Builtin  bool   // the file has no template: DefaultChatTemplate is used
	Source   string // the template's text
	// What the template's text says of tools, read once: hermes, it writes
	// calls in the Hermes format (<tool_call> blocks), which the tools'
	// grammar and parser follow; nativeCalls, it renders a message's
	// tool_calls (PromptTools); listsTools, it mentions the tools at all
	// (toolPrompt's note).
	hermes, nativeCalls, listsTools bool
}

// NewChat reads the model's tokenizer.chat_template, or uses the default.
func NewChat(m *engine.Model, template string) (*Chat, error) {
	src, err := m.File.String("tokenizer.chat_template")
	c := &Chat{}
	switch {
	case template != "": // the operator's, over the file's, as llama-server's --chat-template-file
		src = template
	case err != nil || strings.TrimSpace(src) == "":
		src, c.Builtin = DefaultChatTemplate, true
	}
	c.Source, c.hermes = src, !c.Builtin && strings.Contains(src, hermesOpen)
	c.nativeCalls, c.listsTools = strings.Contains(src, "tool_calls"), strings.Contains(src, "tools")
	if c.tpl, err = ParseTemplate(src); err != nil {
		return nil, err
	}
	v := m.Tok.Vocab()
	if v.BOS >= 0 && v.BOS < len(v.Tokens) {
		c.bos = v.Tokens[v.BOS]
	}
	if v.EOS >= 0 && v.EOS < len(v.Tokens) {
		c.eos = v.Tokens[v.EOS]
	}
	return c, nil
}

// Prompt renders the conversation with add_generation_prompt set.
func (c *Chat) Prompt(msgs []ChatMessage) (string, error) {
	return c.PromptTools(msgs, nil)
}

// EncodeChat tokenizes a rendered chat prompt as llama.cpp's server does:
// the text of special tokens (<s>, <|user|>, ...) becomes those tokens
// (tokenizer.EncodeSpecial), and BOS leads unless the template already put
// it there. A prompt without special-token text is encoded exactly as
// engine.Model.Encode does.
func EncodeChat(tok *tokenizer.Tokenizer, text string) []int {
	v := tok.Vocab()
	out := tok.EncodeSpecial(text, false)
	if v.AddBOS && v.BOS >= 0 && (len(out) == 0 || out[0] != v.BOS) {
		out = append([]int{v.BOS}, out...)
	}
	return out
}
