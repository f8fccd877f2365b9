package safetensors

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
)

// Dir is a model's weights as Hugging Face stores them in a directory: one
// model.safetensors, or shards listed by model.safetensors.index.json.
type Dir struct {
	Path  string // the single file or the index, for error messages
	files []*File
	owner map[string]*File
	names []string
}

// OpenDir opens dir/model.safetensors.index.json when present (checking that
// every shard it names exists and holds the tensors mapped to it), otherwise
// dir/model.safetensors.
func OpenDir(dir string) (*Dir, error) {
	index := filepath.Join(dir, "model.safetensors.index.json")
	raw, err := os.ReadFile(index)
	if errors.Is(err, os.ErrNotExist) {
		single := filepath.Join(dir, "model.safetensors")
		f, err := Open(single)
		if err != nil {
			return nil, err
		}
		d := &Dir{Path: single, files: []*File{f}, owner: map[string]*File{}, names: f.Names()}
		for _, n := range d.names {
			d.owner[n] = f
		}
		return d, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %v", index, err)
	}
	var idx struct {
		WeightMap map[string]string `json:"weight_map"`
	}
	if err := json.Unmarshal(raw, &idx); err != nil {
		return nil, fmt.Errorf("%s: not valid JSON: %v", index, err)
	}
	if len(idx.WeightMap) == 0 {
		return nil, fmt.Errorf("%s: weight_map is missing or empty", index)
	}
	d := &Dir{Path: index, owner: map[string]*File{}}
	shards := map[string]*File{}
	for name, shard := range idx.WeightMap {
		// A shard name is a file beside the index; refuse paths that leave it.
		if !filepath.IsLocal(shard) || filepath.Base(shard) != shard {
			d.Close()
			return nil, fmt.Errorf("%s: weight_map[%q]: shard %q is not a file name in the directory", index, name, shard)
		}
		f, ok := shards[shard]
		if !ok {
			f, err = Open(filepath.Join(dir, shard))
			if err != nil {
				d.Close()
				return nil, fmt.Errorf("%s: weight_map[%q]: %w", index, name, err)
			}
			shards[shard] = f
			d.files = append(d.files, f)
		}
		if !f.Has(name) {
			d.Close()
			return nil, fmt.Errorf("%s: weight_map[%q]: tensor not found in shard %s", index, name, f.Path)
		}
		d.owner[name] = f
		d.names = append(d.names, name)
	}
	sort.Strings(d.names)
	return d, nil
}

// Tensor returns the named tensor, or an error naming the file and tensor.
func (d *Dir) Tensor(name string) (*Tensor, error) {
	if f, ok := d.owner[name]; ok {
		return f.Tensor(name)
	}
	return nil, fmt.Errorf("%s: tensor %q not found", d.Path, name)
}

// Has reports whether the directory holds the named tensor.
func (d *Dir) Has(name string) bool { _, ok := d.owner[name]; return ok }

// Names lists all tensor names, sorted.
func (d *Dir) Names() []string { return append([]string(nil), d.names...) }

// Close unmaps every file, returning the first error.
func (d *Dir) Close() error {
	var first error
	for _, f := range d.files {
		if err := f.Close(); err != nil && first == nil {
			first = err
		}
	}
	d.files = nil
	return first
}
