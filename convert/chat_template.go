package convert

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// chatTemplates are the checkpoint's chat templates as GGUF keys, so that a
// converted instruct model is prompted as it was trained rather than with
// the server's built-in template. chat_template.jinja wins, as it does in
// transformers; else tokenizer_config.json's chat_template, a string or a
// list of {"name", "template"}, written as llama.cpp's converter writes it:
// "default" is tokenizer.chat_template, each other one
// tokenizer.chat_template.<name>, and their names tokenizer.chat_templates.
func chatTemplates(dir string) ([]keyValue, error) {
	jinja, err := os.ReadFile(filepath.Join(dir, "chat_template.jinja"))
	if err == nil {
		return []keyValue{{"tokenizer.chat_template", string(jinja)}}, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	path := filepath.Join(dir, "tokenizer_config.json")
	raw, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	var cfg struct {
		ChatTemplate json.RawMessage `json:"chat_template"`
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	if len(cfg.ChatTemplate) == 0 || string(cfg.ChatTemplate) == "null" {
		return nil, nil
	}
	var one string
	if json.Unmarshal(cfg.ChatTemplate, &one) == nil {
		return []keyValue{{"tokenizer.chat_template", one}}, nil
	}
	var list []struct {
		Name     string  `json:"name"`
		Template *string `json:"template"`
	}
	if err := json.Unmarshal(cfg.ChatTemplate, &list); err != nil {
		return nil, fmt.Errorf("%s: chat_template is neither a string nor a list of {name, template}", path)
	}
	var kv []keyValue
	var names []string
	for _, c := range list {
		// llama.cpp keeps key names to [A-Za-z0-9_].
		name := strings.Map(func(r rune) rune {
			if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
				return r
			}
			return '_'
		}, c.Name)
		switch {
		case name == "" || c.Template == nil:
		case name == "default":
			kv = append(kv, keyValue{"tokenizer.chat_template", *c.Template})
		default:
			kv = append(kv, keyValue{"tokenizer.chat_template." + name, *c.Template})
			if !slices.Contains(names, name) {
				names = append(names, name)
			}
		}
	}
	if len(names) > 0 {
		kv = append(kv, keyValue{"tokenizer.chat_templates", names})
	}
	return kv, nil
}
