// Package gguf reads and writes GGUF v2/v3 model files and PowerInfer's
// variant of them (magic "PWRI", GGUF v3 layout, I32 stored as type id 18).
package gguf

import (
	"crypto/sha256"
	"fmt"
	"math"
	"reflect"
	"sync"

	"github.com/pinfer/pinfer/internal/hugepage"
	"github.com/pinfer/pinfer/ops"
)

// ValueType is a GGUF metadata value type.
type ValueType uint32

const (
	Uint8 ValueType = iota
	Int8
	Uint16
	Int16
	Uint32
	Int32
	Float32
	Bool
	String
	Array
	Uint64
	Int64
	Float64
)

var typeNames = [...]string{"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "bool", "string", "array", "uint64", "int64", "float64"}

func (t ValueType) String() string {
	if int(t) < len(typeNames) {
		return typeNames[t]
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// goTypes maps each value type to the Go type that holds it in Value.V.
var goTypes = [...]reflect.Type{
	reflect.TypeFor[uint8](), reflect.TypeFor[int8](), reflect.TypeFor[uint16](), reflect.TypeFor[int16](),
	reflect.TypeFor[uint32](), reflect.TypeFor[int32](), reflect.TypeFor[float32](), reflect.TypeFor[bool](),
	reflect.TypeFor[string](), reflect.TypeFor[[]Value](), reflect.TypeFor[uint64](), reflect.TypeFor[int64](),
	reflect.TypeFor[float64](),
}

// size is the encoded size of a fixed-size type, 0 for string and array.
func (t ValueType) size() uint64 {
	switch t {
	case Uint8, Int8, Bool:
		return 1
	case Uint16, Int16:
		return 2
	case Uint32, Int32, Float32:
		return 4
	case Uint64, Int64, Float64:
		return 8
	}
	return 0
}

func (t ValueType) isInt() bool {
	return t.size() > 0 && t != Bool && t != Float32 && t != Float64
}

// minSize is the fewest bytes one encoded value of type t can take; it bounds
// how many elements a claimed count can honestly have.
func (t ValueType) minSize() uint64 {
	switch t {
	case String:
		return 8
	case Array:
		return 12
	}
	return t.size()
}

// Value holds one metadata value. V is uint8, int8, uint16, int16, uint32,
// int32, uint64, int64, float32, float64, bool or string; for arrays V is a
// typed slice ([]uint8 ... []float64, []bool, []string) and Elem is the element
// type. Arrays of arrays hold []Value.
type Value struct {
	Type ValueType
	Elem ValueType
	V    any
}

func (v Value) typeName() string {
	if v.Type == Array {
		return "array of " + v.Elem.String()
	}
	return v.Type.String()
}

// KV is one metadata entry.
type KV struct {
	Key   string
	Value Value
}

// TensorInfo describes one tensor of a file.
type TensorInfo struct {
	Name   string
	Dims   []uint64 // GGML order: Dims[0] is the row length
	Type   ops.DType
	Offset uint64 // relative to the data section
	Size   uint64 // bytes
}

// Elems is the number of elements of the tensor.
func (t *TensorInfo) Elems() uint64 {
	n := uint64(1)
	for _, d := range t.Dims {
		n *= d
	}
	return n
}

// File is an open, validated GGUF file whose tensor data stays mapped until Close.
type File struct {
	Path       string
	Magic      string
	Version    uint32
	Alignment  uint64
	DataOffset uint64 // absolute file offset of the data section
	KVs        []KV
	Tensors    []TensorInfo // file order

	data    []byte
	fpOnce  sync.Once
	fp      [32]byte // Fingerprint's
	unmap   func() error
	kvIdx   map[string]int
	tensIdx map[string]int
}

// Close releases the mapping; slices returned by Data become invalid.
func (f *File) Close() error {
	if f.unmap == nil {
		return nil
	}
	err := f.unmap()
	f.unmap, f.data = nil, nil
	return err
}

// KV returns the value stored under key.
func (f *File) KV(key string) (Value, bool) {
	i, ok := f.kvIdx[key]
	if !ok {
		return Value{}, false
	}
	return f.KVs[i].Value, true
}

// Has reports whether key is present.
func (f *File) Has(key string) bool { _, ok := f.kvIdx[key]; return ok }

// Arch returns general.architecture, or "" when it is missing or not a string.
func (f *File) Arch() string { s, _ := f.String("general.architecture"); return s }

// Tensor looks a tensor up by name.
func (f *File) Tensor(name string) (*TensorInfo, bool) {
	i, ok := f.tensIdx[name]
	if !ok {
		return nil, false
	}
	return &f.Tensors[i], true
}

// HugePages returns the part of the file's resident bytes that the kernel
// maps in 2 MB pages; ok is false where it does not say.
func (f *File) HugePages() (frac float64, ok bool) { return hugepage.Share(f.data) }

// Data returns the tensor's bytes inside the mapping, without copying.
func (f *File) Data(t *TensorInfo) []byte {
	start := f.DataOffset + t.Offset
	return f.data[start : start+t.Size : start+t.Size]
}

func (f *File) keyErr(key, format string, args ...any) error {
	return fmt.Errorf("%s: metadata key %q: %s", f.Path, key, fmt.Sprintf(format, args...))
}

func (f *File) get(key string) (Value, error) {
	v, ok := f.KV(key)
	if !ok {
		return v, f.keyErr(key, "missing")
	}
	return v, nil
}

// typed fetches a value whose Go type must be exactly T; that type alone
// identifies the GGUF type, since each one decodes to a distinct Go type.
func typed[T any](f *File, key, want string) (T, error) {
	v, err := f.get(key)
	x, ok := v.V.(T)
	if err == nil && !ok {
		err = f.keyErr(key, "want %s, got %s", want, v.typeName())
	}
	return x, err
}

// String returns a string value.
func (f *File) String(key string) (string, error) { return typed[string](f, key, "string") }

// Bool returns a bool value.
func (f *File) Bool(key string) (bool, error) { return typed[bool](f, key, "bool") }

// Strings returns an array of strings; the slice is shared with the File.
func (f *File) Strings(key string) ([]string, error) {
	return typed[[]string](f, key, "array of string")
}

// Float32s returns an array of float32; the slice is shared with the File.
func (f *File) Float32s(key string) ([]float32, error) {
	return typed[[]float32](f, key, "array of float32")
}

// toInt widens any integer value; neg reports a negative one, which u then
// holds in two's complement.
func toInt(x any) (u uint64, neg bool, ok bool) {
	rv := reflect.ValueOf(x)
	switch rv.Kind() {
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return uint64(rv.Int()), rv.Int() < 0, true
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return rv.Uint(), false, true
	}
	return 0, false, false
}

// Uint returns a value of any integer type that is not negative.
func (f *File) Uint(key string) (uint64, error) {
	v, err := f.get(key)
	if err != nil {
		return 0, err
	}
	u, neg, ok := toInt(v.V)
	switch {
	case !ok:
		return 0, f.keyErr(key, "want integer, got %s", v.typeName())
	case neg:
		return 0, f.keyErr(key, "want a non-negative integer, got %d", int64(u))
	}
	return u, nil
}

// Int returns a value of any integer type that fits an int64.
func (f *File) Int(key string) (int64, error) {
	v, err := f.get(key)
	if err != nil {
		return 0, err
	}
	u, neg, ok := toInt(v.V)
	switch {
	case !ok:
		return 0, f.keyErr(key, "want integer, got %s", v.typeName())
	case !neg && u > math.MaxInt64:
		return 0, f.keyErr(key, "%d does not fit an int64", u)
	}
	return int64(u), nil
}

// Float returns a float or integer value as float64.
func (f *File) Float(key string) (float64, error) {
	v, err := f.get(key)
	if err != nil {
		return 0, err
	}
	if v.Type == Float32 || v.Type == Float64 {
		return reflect.ValueOf(v.V).Float(), nil
	}
	u, neg, ok := toInt(v.V)
	if !ok {
		return 0, f.keyErr(key, "want number, got %s", v.typeName())
	}
	if neg {
		return float64(int64(u)), nil
	}
	return float64(u), nil
}

// Int32s returns an array of any integer type whose values all fit an int32.
func (f *File) Int32s(key string) ([]int32, error) {
	v, err := f.get(key)
	if err != nil {
		return nil, err
	}
	if v.Type != Array || !v.Elem.isInt() {
		return nil, f.keyErr(key, "want integer array, got %s", v.typeName())
	}
	if s, ok := v.V.([]int32); ok {
		return s, nil
	}
	arr := reflect.ValueOf(v.V)
	out := make([]int32, arr.Len())
	for i := range out {
		u, neg, _ := toInt(arr.Index(i).Interface())
		x := int64(u)
		if (!neg && u > math.MaxInt32) || x < math.MinInt32 {
			return nil, f.keyErr(key, "element %d (%v) does not fit an int32", i, arr.Index(i).Interface())
		}
		out[i] = int32(x)
	}
	return out, nil
}

// Size is the file's length in bytes.
func (f *File) Size() int64 { return int64(len(f.data)) }

// fingerprintSample is how many bytes of each end of a tensor's data
// Fingerprint reads.
const fingerprintSample = 256

// Fingerprint names the file's contents without reading its weights
// whole: the SHA-256 of its header, metadata and tensor table, and of the
// first and last 256 bytes of each tensor's data (so that two checkpoints
// of one shape, whose headers may be the same byte for byte, differ). A
// saved session state carries it, to be restored only into this model.
// Made on the first call.
func (f *File) Fingerprint() [32]byte {
	f.fpOnce.Do(func() { f.fp = f.fingerprint() })
	return f.fp
}

func (f *File) fingerprint() [32]byte {
	h := sha256.New()
	h.Write(f.data[:min(f.DataOffset, uint64(len(f.data)))])
	for i := range f.Tensors {
		b := f.Data(&f.Tensors[i])
		n := min(len(b), fingerprintSample)
		h.Write(b[:n])
		h.Write(b[len(b)-n:])
	}
	var sum [32]byte
	h.Sum(sum[:0])
	return sum
}
