package safetensors

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
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
// dir/model.safetensors, otherwise every model*.safetensors in dir (shards
// whose index was not downloaded), as llama.cpp's converter reads them.
// Tensors a shard holds that the index leaves out are kept too, as
// llama.cpp's converter keeps them: none is silently dropped.
func OpenDir(dir string) (*Dir, error) {
	index := filepath.Join(dir, "model.safetensors.index.json")
	raw, err := os.ReadFile(index)
	if errors.Is(err, os.ErrNotExist) {
		return openShards(dir)
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
	// Sorted, so that the first error and the shard order do not depend on
	// map iteration.
	names := make([]string, 0, len(idx.WeightMap))
	for name := range idx.WeightMap {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		shard := idx.WeightMap[name]
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
	}
	for _, f := range d.files {
		for _, n := range f.Names() {
			if _, listed := idx.WeightMap[n]; listed {
				continue
			}
			if other, ok := d.owner[n]; ok && other != f {
				d.Close()
				return nil, fmt.Errorf("%s: tensor %q, which the index does not list, is in both %s and %s", index, n, other.Path, f.Path)
			}
			d.owner[n] = f
		}
	}
	d.sortNames()
	return d, nil
}

// openShards opens dir/model.safetensors, or when it is absent every
// model*.safetensors file of dir, each tensor in exactly one of them.
func openShards(dir string) (*Dir, error) {
	single := filepath.Join(dir, "model.safetensors")
	paths := []string{single}
	if _, err := os.Stat(single); errors.Is(err, os.ErrNotExist) {
		entries, _ := os.ReadDir(dir)
		var found []string
		for _, e := range entries {
			n := e.Name()
			if strings.HasPrefix(n, "model") && strings.HasSuffix(n, ".safetensors") && !e.IsDir() {
				found = append(found, filepath.Join(dir, n))
			}
		}
		if len(found) > 0 {
			sort.Strings(found)
			paths = found
		}
	}
	d := &Dir{Path: paths[0], owner: map[string]*File{}}
	if len(paths) > 1 {
		d.Path = filepath.Join(dir, "model*.safetensors")
	}
	for _, p := range paths {
		f, err := Open(p)
		if err != nil {
			d.Close()
			return nil, err
		}
		d.files = append(d.files, f)
		for _, n := range f.Names() {
			if other, ok := d.owner[n]; ok {
				d.Close()
				return nil, fmt.Errorf("%s: tensor %q is also in %s", f.Path, n, other.Path)
			}
			d.owner[n] = f
		}
	}
	d.sortNames()
	return d, nil
}

func (d *Dir) sortNames() {
	d.names = d.names[:0]
	for n := range d.owner {
		d.names = append(d.names, n)
	}
	sort.Strings(d.names)
}

// Files lists the paths of the safetensors files the directory's tensors
// come from (the index not included).
func (d *Dir) Files() []string {
	var out []string
	for _, f := range d.files {
		out = append(out, f.Path)
	}
	return out
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
