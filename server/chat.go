package server

import (
	"sort"
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
}

// Chat turns conversations into prompts for one model.
type Chat struct {
	tpl      *Template
	bos, eos string
	Builtin  bool // the file has no template: DefaultChatTemplate is used
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
	list := make([]any, len(msgs))
	for i, m := range msgs {
		e := map[string]any{"role": m.Role, "content": m.Content}
		if m.Name != "" {
			e["name"] = m.Name
		}
		list[i] = e
	}
	return c.tpl.Render(map[string]any{
		"messages":              list,
		"bos_token":             c.bos,
		"eos_token":             c.eos,
		"add_generation_prompt": true,
	})
}

// EncodeChat tokenizes a rendered chat prompt as llama.cpp's server does:
// the text of control tokens (<s>, <|user|>, ...) becomes those tokens, the
// text between them is encoded normally (each piece with the dummy-prefix
// space), and BOS leads unless the template already put it there. A prompt
// without control-token text is encoded exactly as engine.Model.Encode does.
// (The one pass over the vocabulary per request is cheap next to a forward pass.)
func EncodeChat(tok *tokenizer.Tokenizer, text string) []int {
	v := tok.Vocab()
	var specials []string
	ids := map[string]int{}
	for id, t := range v.Tokens {
		if v.Types[id] == tokenizer.Control && t != "" && strings.Contains(text, t) {
			specials = append(specials, t)
			ids[t] = id
		}
	}
	if len(specials) == 0 {
		return tok.Encode(text, v.AddBOS)
	}
	sort.Slice(specials, func(i, j int) bool { return len(specials[i]) > len(specials[j]) })
	var out []int
	for len(text) > 0 {
		at, which := len(text), ""
		for _, s := range specials {
			if k := strings.Index(text, s); k >= 0 && (k < at || k == at && len(s) > len(which)) {
				at, which = k, s
			}
		}
		if at > 0 {
			out = append(out, tok.Encode(text[:at], false)...)
		}
		if which == "" {
			break
		}
		out = append(out, ids[which])
		text = text[at+len(which):]
	}
	if v.AddBOS && v.BOS >= 0 && (len(out) == 0 || out[0] != v.BOS) {
		out = append([]int{v.BOS}, out...)
	}
	return out
}
