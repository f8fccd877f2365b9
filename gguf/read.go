package gguf

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"os"
	"reflect"

	"github.com/pinfer/pinfer/ops"
)

const (
	maxDims       = 4  // GGML_MAX_DIMS
	maxArrayDepth = 8  // deeper nesting is never legitimate and only risks the stack
	defaultAlign  = 32 // GGUF's default general.alignment
	maxSize       = 1 << 62
)

// decoder walks the header. The first error sticks and later reads return
// zeros, so callers check err once per item; what names the item being read
// so every error can say where it happened.
type decoder struct {
	b    []byte
	pos  uint64
	path string
	what string
	err  error
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%s: %s: %s", d.path, d.what, fmt.Sprintf(format, args...))
	}
}

func (d *decoder) left() uint64 { return uint64(len(d.b)) - d.pos }

func (d *decoder) take(n uint64) []byte {
	if d.err != nil {
		return nil
	}
	if n > d.left() {
		d.err = fmt.Errorf("%s: truncated at byte %d reading %s", d.path, len(d.b), d.what)
		return nil
	}
	p := d.b[d.pos : d.pos+n]
	d.pos += n
	return p
}

func (d *decoder) u32() uint32 {
	if p := d.take(4); p != nil {
		return binary.LittleEndian.Uint32(p)
	}
	return 0
}

func (d *decoder) u64() uint64 {
	if p := d.take(8); p != nil {
		return binary.LittleEndian.Uint64(p)
	}
	return 0
}

func (d *decoder) str() string {
	n := d.u64()
	if d.err == nil && n > d.left() {
		d.fail("string length %d exceeds the %d bytes left at byte %d", n, d.left(), d.pos)
	}
	return string(d.take(n))
}

// count checks a claimed element count against the bytes left, so that
// nothing is allocated for a count the file cannot hold.
func (d *decoder) count(n, minSize uint64, of string) bool {
	if d.err == nil && n > d.left()/minSize {
		d.fail("%d %s need at least %d bytes each, only %d left at byte %d", n, of, minSize, d.left(), d.pos)
	}
	return d.err == nil
}

// fixedData decodes n values of a fixed-size type: a scalar when n < 0,
// otherwise a typed slice.
func (d *decoder) fixedData(t ValueType, n int64) any {
	goType := goTypes[t]
	if n >= 0 {
		goType = reflect.SliceOf(goType)
	}
	size := t.size()
	if n >= 0 {
		size *= uint64(n)
	}
	p := d.take(size)
	if d.err != nil {
		return nil
	}
	ptr := reflect.New(goType)
	if n >= 0 {
		ptr.Elem().Set(reflect.MakeSlice(goType, int(n), int(n)))
	}
	binary.Decode(p, binary.LittleEndian, ptr.Interface())
	return ptr.Elem().Interface()
}

func (d *decoder) value(t ValueType, depth int) Value {
	switch {
	case t == Array:
		return d.array(depth)
	case t == String:
		return Value{Type: String, V: d.str()}
	case t.size() == 0:
		d.fail("unknown value type %d", uint32(t))
		return Value{}
	}
	return Value{Type: t, V: d.fixedData(t, -1)}
}

func (d *decoder) array(depth int) Value {
	if depth >= maxArrayDepth {
		d.fail("arrays nested deeper than %d", maxArrayDepth)
		return Value{}
	}
	elem := ValueType(d.u32())
	n := d.u64()
	if d.err == nil && elem.minSize() == 0 {
		d.fail("array of unknown value type %d", uint32(elem))
	}
	if !d.count(n, elem.minSize(), "array elements of "+elem.String()) {
		return Value{}
	}
	v := Value{Type: Array, Elem: elem}
	switch elem {
	case String:
		s := make([]string, n)
		for i := range s {
			if s[i] = d.str(); d.err != nil {
				return v
			}
		}
		v.V = s
	case Array:
		s := make([]Value, n)
		for i := range s {
			if s[i] = d.array(depth + 1); d.err != nil {
				return v
			}
		}
		v.V = s
	default:
		v.V = d.fixedData(elem, int64(n))
	}
	return v
}

// Open maps and validates a GGUF or PWRI file.
func Open(path string) (*File, error) {
	data, unmap, err := mapFile(path)
	if pe, ok := err.(*os.PathError); ok {
		return nil, fmt.Errorf("%s: %s: %w", path, pe.Op, pe.Err)
	} else if err != nil {
		return nil, err
	}
	f := &File{Path: path, data: data, unmap: unmap}
	if err := f.parse(); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// ggmlOnly names GGML's tensor types whose layout pinfer does not know,
// for the message that refuses them.
var ggmlOnly = map[uint32]string{16: "iq2_xxs", 17: "iq2_xs", 18: "iq3_xxs", 19: "iq1_s", 20: "iq4_nl",
	21: "iq3_s", 22: "iq2_s", 23: "iq4_xs", 29: "iq1_m", 34: "tq1_0", 35: "tq2_0", 39: "mxfp4"}

func (f *File) parse() error {
	d := &decoder{b: f.data, path: f.Path, what: "header"}
	f.Magic = string(d.take(4))
	if d.err == nil && f.Magic != "GGUF" && f.Magic != "PWRI" {
		return fmt.Errorf("%s: bad magic %q, want \"GGUF\" or \"PWRI\"", f.Path, f.Magic)
	}
	f.Version = d.u32()
	if d.err == nil && f.Version != 2 && f.Version != 3 {
		if v := bits.ReverseBytes32(f.Version); v == 2 || v == 3 {
			return fmt.Errorf("%s: a big-endian GGUF (version %d); pinfer reads little-endian files, as llama.cpp does on x86 and ARM", f.Path, v)
		}
		return fmt.Errorf("%s: unsupported GGUF version %d (want 2 or 3)", f.Path, f.Version)
	}
	nTensors, nKVs := d.u64(), d.u64()
	if !d.count(nKVs, 8+4+1, "metadata entries") {
		return d.err
	}
	f.KVs = make([]KV, 0, nKVs)
	f.kvIdx = make(map[string]int, nKVs)
	for i := uint64(0); i < nKVs; i++ {
		d.what = fmt.Sprintf("metadata entry %d of %d", i, nKVs)
		key := d.str()
		d.what = fmt.Sprintf("metadata key %q", key)
		if _, dup := f.kvIdx[key]; dup {
			d.fail("duplicate key")
		}
		v := d.value(ValueType(d.u32()), 0)
		if d.err != nil {
			return d.err
		}
		f.kvIdx[key] = len(f.KVs)
		f.KVs = append(f.KVs, KV{key, v})
	}
	if err := f.parseAlignment(); err != nil {
		return err
	}
	d.what = "header"
	if !d.count(nTensors, 8+4+8+4+8, "tensor infos") {
		return d.err
	}
	f.Tensors = make([]TensorInfo, 0, nTensors)
	f.tensIdx = make(map[string]int, nTensors)
	for i := uint64(0); i < nTensors; i++ {
		d.what = fmt.Sprintf("tensor info %d of %d", i, nTensors)
		t := f.tensorInfo(d)
		if d.err != nil {
			return d.err
		}
		f.tensIdx[t.Name] = len(f.Tensors)
		f.Tensors = append(f.Tensors, t)
	}
	f.DataOffset = alignUp(d.pos, f.Alignment)
	for _, t := range f.Tensors {
		end := f.DataOffset + t.Offset + t.Size // cannot overflow: each term is below 2^62
		if end > uint64(len(f.data)) {
			return fmt.Errorf("%s: tensor %q: data [%d, %d) runs past the end of the file (%d bytes)",
				f.Path, t.Name, f.DataOffset+t.Offset, end, len(f.data))
		}
	}
	return nil
}

func (f *File) parseAlignment() error {
	f.Alignment = defaultAlign
	if !f.Has("general.alignment") {
		return nil
	}
	a, err := f.Uint("general.alignment")
	if err == nil && (a == 0 || a > 1<<30) {
		err = f.keyErr("general.alignment", "alignment %d out of range", a)
	}
	f.Alignment = a
	return err
}

func alignUp(n, a uint64) uint64 { return (n + a - 1) / a * a }

func (f *File) tensorInfo(d *decoder) TensorInfo {
	t := TensorInfo{Name: d.str()}
	if d.err != nil {
		return t
	}
	d.what = fmt.Sprintf("tensor %q", t.Name)
	if _, dup := f.tensIdx[t.Name]; dup {
		d.fail("duplicate tensor name")
	}
	nd := d.u32()
	if d.err == nil && (nd == 0 || nd > maxDims) {
		d.fail("%d dimensions, want 1 to %d", nd, maxDims)
	}
	if d.err != nil {
		return t
	}
	t.Dims = make([]uint64, nd)
	for i := range t.Dims {
		t.Dims[i] = d.u64()
	}
	id := d.u32()
	t.Type = ops.DType(id)
	if f.Magic == "PWRI" {
		t.Type = ops.FromPowerInfer(id)
	}
	t.Offset = d.u64()
	if d.err != nil {
		return t
	}
	var err error
	switch {
	case !t.Type.Known() && ggmlOnly[id] != "":
		d.fail("unknown dtype id %d (llama.cpp's %s, which pinfer does not read)", id, ggmlOnly[id])
	case !t.Type.Known():
		d.fail("unknown dtype id %d", id)
	case t.Offset%f.Alignment != 0:
		d.fail("data offset %d is not a multiple of the alignment %d", t.Offset, f.Alignment)
	case t.Offset > maxSize:
		d.fail("data offset %d is beyond any file", t.Offset)
	default:
		if t.Size, err = tensorSize(t.Type, t.Dims); err != nil {
			d.fail("%v", err)
		}
	}
	return t
}

// tensorSize is the byte size of a tensor; GGML blocks never span rows, so
// the row length must fill whole blocks.
func tensorSize(typ ops.DType, dims []uint64) (uint64, error) {
	elems := uint64(1)
	for _, n := range dims {
		hi, lo := bits.Mul64(elems, n)
		if hi != 0 || lo > maxSize {
			return 0, fmt.Errorf("dims %v hold too many elements", dims)
		}
		elems = lo
	}
	be := uint64(typ.BlockElems())
	if dims[0]%be != 0 {
		return 0, fmt.Errorf("row length %d of %s does not fill whole blocks of %d", dims[0], typ, be)
	}
	hi, size := bits.Mul64(elems/be, uint64(typ.BlockBytes()))
	if hi != 0 || size > maxSize {
		return 0, fmt.Errorf("dims %v of %s take too many bytes", dims, typ)
	}
	return size, nil
}
