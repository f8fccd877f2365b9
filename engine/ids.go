package engine

import "fmt"

// GenerateIDs runs a prompt given as token ids, for models without a
// tokenizer and for scripted checks against a reference.
func (m *Model) GenerateIDs(prompt []int, opt Options) (*Result, error) {
	if len(prompt) == 0 {
		return nil, fmt.Errorf("no prompt ids")
	}
	opt.PromptIDs = prompt
	return m.Generate(opt)
}
