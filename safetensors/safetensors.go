// Package safetensors reads Hugging Face .safetensors files, one file or a
// sharded set, without copying tensor data into the Go heap: on unix systems
// the file is memory-mapped and each Tensor's Data is a view into the map.
package safetensors

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/bits"
	"os"
	"sort"
)

// maxHeader bounds the JSON header so that a corrupt length cannot make us
// allocate gigabytes before parsing fails.
const maxHeader = 100 << 20

// Tensor is one named array. Data aliases the file's mapping: it is valid
// only until the File that returned it is closed.
type Tensor struct {
	Name  string
	DType string // "F32", "F16", "BF16", ... as the file spells it
	Shape []int
	Data  []byte
	File  string // path of the file holding it, for error messages
}

// File is one opened .safetensors file.
type File struct {
	Path     string
	Metadata map[string]string // the optional "__metadata__" entry

	data    []byte // the data section, after the header
	release func() error
	tensors map[string]*Tensor
	names   []string
}

// elemSize gives bytes per element of every dtype the format defines, so a
// file holding types we do not convert still opens.
var elemSize = map[string]int{
	"BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1,
	"I16": 2, "U16": 2, "F16": 2, "BF16": 2,
	"I32": 4, "U32": 4, "F32": 4,
	"I64": 8, "U64": 8, "F64": 8,
}

type entry struct {
	DType       string  `json:"dtype"`
	Shape       []int   `json:"shape"`
	DataOffsets []int64 `json:"data_offsets"`
}

// Open maps path and validates its header: the length prefix, the JSON, each
// tensor's dtype and that its data_offsets lie inside the file and span
// exactly shape×dtype bytes.
func Open(path string) (*File, error) {
	buf, release, err := mapFile(path)
	if err != nil {
		return nil, err
	}
	f, err := parse(path, buf)
	if err != nil {
		release()
		return nil, err
	}
	f.release = release
	return f, nil
}

func parse(path string, buf []byte) (*File, error) {
	if len(buf) < 8 {
		return nil, fmt.Errorf("%s: file is %d bytes, shorter than the 8-byte header length", path, len(buf))
	}
	n := binary.LittleEndian.Uint64(buf)
	if n > maxHeader || n > uint64(len(buf)-8) {
		return nil, fmt.Errorf("%s: header length %d does not fit in the file of %d bytes (truncated?)", path, n, len(buf))
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(buf[8:8+n], &raw); err != nil {
		return nil, fmt.Errorf("%s: header is not a JSON object: %v", path, err)
	}
	f := &File{Path: path, data: buf[8+n:], tensors: make(map[string]*Tensor, len(raw))}
	for name, msg := range raw {
		if name == "__metadata__" {
			if err := json.Unmarshal(msg, &f.Metadata); err != nil {
				return nil, fmt.Errorf("%s: __metadata__ is not a string map: %v", path, err)
			}
			continue
		}
		t, err := f.check(name, msg)
		if err != nil {
			return nil, err
		}
		f.tensors[name] = t
		f.names = append(f.names, name)
	}
	sort.Strings(f.names)
	return f, nil
}

func (f *File) check(name string, msg json.RawMessage) (*Tensor, error) {
	var e entry
	if err := json.Unmarshal(msg, &e); err != nil {
		return nil, fmt.Errorf("%s: tensor %q: bad header entry: %v", f.Path, name, err)
	}
	size, ok := elemSize[e.DType]
	if !ok {
		return nil, fmt.Errorf("%s: tensor %q: unknown dtype %q", f.Path, name, e.DType)
	}
	want := uint64(size)
	for _, d := range e.Shape {
		if d < 0 {
			return nil, fmt.Errorf("%s: tensor %q: negative dimension in shape %v", f.Path, name, e.Shape)
		}
		hi, lo := bits.Mul64(want, uint64(d))
		if hi != 0 || lo > math.MaxInt64 {
			return nil, fmt.Errorf("%s: tensor %q: shape %v overflows", f.Path, name, e.Shape)
		}
		want = lo
	}
	if len(e.DataOffsets) != 2 {
		return nil, fmt.Errorf("%s: tensor %q: data_offsets has %d values, want 2", f.Path, name, len(e.DataOffsets))
	}
	begin, end := e.DataOffsets[0], e.DataOffsets[1]
	if begin < 0 || end < begin || end > int64(len(f.data)) {
		return nil, fmt.Errorf("%s: tensor %q: data_offsets [%d, %d] outside the %d-byte data section (truncated?)",
			f.Path, name, begin, end, len(f.data))
	}
	if uint64(end-begin) != want {
		return nil, fmt.Errorf("%s: tensor %q: data_offsets span %d bytes, shape %v of %s needs %d",
			f.Path, name, end-begin, e.Shape, e.DType, want)
	}
	shape := e.Shape
	if shape == nil {
		shape = []int{}
	}
	return &Tensor{Name: name, DType: e.DType, Shape: shape, Data: f.data[begin:end:end], File: f.Path}, nil
}

// Tensor returns the named tensor, or an error naming the file and tensor.
func (f *File) Tensor(name string) (*Tensor, error) {
	if t, ok := f.tensors[name]; ok {
		return t, nil
	}
	return nil, fmt.Errorf("%s: tensor %q not found", f.Path, name)
}

// Has reports whether the file holds the named tensor.
func (f *File) Has(name string) bool { _, ok := f.tensors[name]; return ok }

// Names lists the tensor names, sorted.
func (f *File) Names() []string { return append([]string(nil), f.names...) }

// Close unmaps the file; Tensors obtained from it must not be used after.
func (f *File) Close() error {
	if f.release == nil {
		return nil
	}
	err := f.release()
	f.release, f.data, f.tensors = nil, nil, nil
	return err
}

// Elems is the number of elements, the product of the shape.
func (t *Tensor) Elems() int {
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// Float32s decodes the whole tensor into a new slice.
func (t *Tensor) Float32s() ([]float32, error) {
	out := make([]float32, t.Elems())
	if err := Decode(t.DType, out, t.Data); err != nil {
		return nil, fmt.Errorf("%s: tensor %q: %v", t.File, t.Name, err)
	}
	return out, nil
}

func openErr(path string, err error) error {
	if os.IsNotExist(err) {
		return fmt.Errorf("%s: no such file", path)
	}
	return err
}
