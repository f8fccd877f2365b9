package server

import "fmt"

// Template is a parsed chat template: the subset of Jinja that model files'
// tokenizer.chat_template strings use (if/elif/else, for with loop.*, set and
// namespace, filters, tests, string methods, raise_exception), rendered with
// Hugging Face's trim_blocks and lstrip_blocks.
type Template struct {
	root []node
}

// ParseTemplate parses a template's source.
func ParseTemplate(src string) (*Template, error) {
	segs, err := lexTemplate(src)
	if err != nil {
		return nil, err
	}
	root, err := parseTemplate(segs)
	if err != nil {
		return nil, err
	}
	return &Template{root: root}, nil
}

// Render runs the template with the given variables (strings, numbers,
// bools, []any and map[string]any; a map's keys are listed sorted). An error
// from raise_exception carries the template's own message.
func (t *Template) Render(vars map[string]any) (out string, err error) {
	global := make(map[string]any, len(vars))
	for k, v := range vars {
		if global[k], err = fromGo(v, 0); err != nil {
			return "", fmt.Errorf("chat template: %v", err)
		}
	}
	r := &renderer{scopes: []map[string]any{global, {}}}
	if err := r.nodes(t.root); err != nil {
		if _, ok := err.(*raised); ok {
			return "", err
		}
		return "", fmt.Errorf("chat template: %v", err)
	}
	return r.out.String(), nil
}

// A chat template comes from the model file, so what rendering one may cost
// is bounded, far above what any chat prompt needs: the output and every
// value the template builds (measured as printed, a shared part counted
// each time it appears) stay within maxTemplateBytes, lists and loops within
// maxTemplateItems, nesting (of the source and of values) within
// maxTemplateDepth, and the evaluations within maxTemplateSteps.
const (
	maxTemplateBytes = 16 << 20
	maxTemplateItems = 1 << 20
	maxTemplateDepth = 256
	maxTemplateSteps = 1 << 22
)
