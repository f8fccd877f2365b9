package gguf

import (
	"bufio"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"reflect"

	"github.com/pinfer/pinfer/ops"
)

// Writer collects metadata and tensors and streams them to a file, so a
// model never has to be held in memory whole.
type Writer struct {
	Magic string // "GGUF" (default) or "PWRI"

	kvs     []KV
	kvIdx   map[string]int
	tensors []wTensor
	tensIdx map[string]bool
}

type wTensor struct {
	TensorInfo
	write func(io.Writer) error
}

// NewWriter returns an empty GGUF writer.
func NewWriter() *Writer {
	return &Writer{Magic: "GGUF", kvIdx: map[string]int{}, tensIdx: map[string]bool{}}
}

// CopyOf returns a writer holding src's magic, metadata and tensors (their
// data read from src when written, so src must stay open until then), to
// change before writing: Set replaces a key's value in place, AddTensor
// adds tensors after src's.
func CopyOf(src *File) (*Writer, error) {
	w := NewWriter()
	w.Magic = src.Magic
	for _, kv := range src.KVs {
		if err := w.Set(kv.Key, kv.Value); err != nil {
			return nil, fmt.Errorf("%s: %v", src.Path, err)
		}
	}
	for i := range src.Tensors {
		t := &src.Tensors[i]
		data := src.Data(t)
		if err := w.AddTensor(t.Name, t.Type, t.Dims, func(o io.Writer) error { _, err := o.Write(data); return err }); err != nil {
			return nil, fmt.Errorf("%s: %v", src.Path, err)
		}
	}
	return w, nil
}

func (w *Writer) init() {
	if w.kvIdx == nil {
		w.kvIdx, w.tensIdx = map[string]int{}, map[string]bool{}
	}
}

// Set stores a metadata value, inferring its GGUF type from the Go type; a
// Value is stored as it is. Setting a key again replaces the value in place.
func (w *Writer) Set(key string, v any) error {
	if key == "" {
		return errors.New("gguf: metadata key is empty")
	}
	w.init()
	val, err := toValue(v)
	if err != nil {
		return fmt.Errorf("gguf: metadata key %q: %v", key, err)
	}
	if i, ok := w.kvIdx[key]; ok {
		w.kvs[i].Value = val
		return nil
	}
	w.kvIdx[key] = len(w.kvs)
	w.kvs = append(w.kvs, KV{key, val})
	return nil
}

func toValue(v any) (Value, error) {
	if x, ok := v.(Value); ok {
		got, err := toValue(x.V)
		if err == nil && (got.Type != x.Type || got.Elem != x.Elem) {
			err = fmt.Errorf("value says %s but holds %s", x.typeName(), got.typeName())
		}
		return x, err
	}
	if x, ok := v.([]Value); ok {
		for _, e := range x {
			if _, err := toValue(e); err != nil || e.Type != Array {
				return Value{}, fmt.Errorf("a nested array must hold arrays only, got %s", e.typeName())
			}
		}
		return Value{Type: Array, Elem: Array, V: x}, nil
	}
	rt := reflect.TypeOf(v)
	for t, gt := range goTypes {
		switch {
		case ValueType(t) == Array:
		case rt == gt:
			return Value{Type: ValueType(t), V: v}, nil
		case rt == reflect.SliceOf(gt):
			return Value{Type: Array, Elem: ValueType(t), V: v}, nil
		}
	}
	return Value{}, fmt.Errorf("cannot store Go type %T (use a sized integer, float, bool, string or a slice of them)", v)
}

// AddTensor queues a tensor; write is called during WriteFile and must write
// exactly the tensor's size in bytes.
func (w *Writer) AddTensor(name string, typ ops.DType, dims []uint64, write func(io.Writer) error) error {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("gguf: tensor %q: %s", name, fmt.Sprintf(format, args...))
	}
	w.init()
	switch {
	case name == "":
		return errors.New("gguf: tensor name is empty")
	case w.tensIdx[name]:
		return fail("added twice")
	case !typ.Known():
		return fail("unknown dtype id %d", uint32(typ))
	case len(dims) == 0 || len(dims) > maxDims:
		return fail("%d dimensions, want 1 to %d", len(dims), maxDims)
	case write == nil:
		return fail("no data writer")
	}
	size, err := tensorSize(typ, dims)
	if err != nil {
		return fail("%v", err)
	}
	w.tensIdx[name] = true
	info := TensorInfo{Name: name, Type: typ, Dims: append([]uint64(nil), dims...), Size: size}
	w.tensors = append(w.tensors, wTensor{info, write})
	return nil
}

func (w *Writer) alignment() (uint64, error) {
	i, ok := w.kvIdx["general.alignment"]
	if !ok {
		return defaultAlign, nil
	}
	u, neg, isInt := toInt(w.kvs[i].Value.V)
	if !isInt || neg || u == 0 || u > 1<<30 {
		return 0, fmt.Errorf("metadata key \"general.alignment\": want a positive integer up to 2^30, got %v", w.kvs[i].Value.V)
	}
	return u, nil
}

// WriteFile writes a temporary file beside path and renames it to path once
// complete, so a failed write never leaves a half file under the real name
// and never touches an existing file but path itself. progress, when not
// nil, is called as tensor bytes are written.
func (w *Writer) WriteFile(path string, progress func(done, total int64)) (err error) {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return fmt.Errorf("%s: is a directory, want a file name", path)
	}
	fh, tmp, err := createTemp(path)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			fh.Close()
			os.Remove(tmp)
		}
	}()
	if err = w.write(fh, progress); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err = fh.Sync(); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err = fh.Close(); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err = os.Rename(tmp, path); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// createTemp makes a new file beside path, named after it, that no other
// file had: a user's PATH.tmp is never truncated or removed. The file gets
// os.Create's permissions (0666 less the umask), unlike os.CreateTemp's 0600.
func createTemp(path string) (*os.File, string, error) {
	var suffix [6]byte
	for range 100 {
		if _, err := rand.Read(suffix[:]); err != nil {
			return nil, "", fmt.Errorf("%s: %w", path, err)
		}
		tmp := fmt.Sprintf("%s.%s.tmp", path, hex.EncodeToString(suffix[:]))
		fh, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o666)
		if err == nil {
			return fh, tmp, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return nil, "", fmt.Errorf("%s: cannot create the file: %w", path, err)
		}
	}
	return nil, "", fmt.Errorf("%s: cannot find a free temporary name beside it", path)
}

func (w *Writer) write(out io.Writer, progress func(done, total int64)) error {
	magic := w.Magic
	if magic == "" {
		magic = "GGUF"
	}
	if magic != "GGUF" && magic != "PWRI" {
		return fmt.Errorf("magic %q, want \"GGUF\" or \"PWRI\"", magic)
	}
	align, err := w.alignment()
	if err != nil {
		return err
	}
	var total uint64
	for i := range w.tensors {
		t := &w.tensors[i]
		t.Offset = total
		total = alignUp(t.Offset+t.Size, align) // readers that load the data section whole expect the tail padded too
	}
	bw := &encoder{w: bufio.NewWriterSize(out, 1<<20)}
	bw.raw([]byte(magic))
	bw.u32(3)
	bw.u64(uint64(len(w.tensors)))
	bw.u64(uint64(len(w.kvs)))
	for _, kv := range w.kvs {
		bw.str(kv.Key)
		bw.u32(uint32(kv.Value.Type))
		bw.value(kv.Value)
	}
	for _, t := range w.tensors {
		bw.str(t.Name)
		bw.u32(uint32(len(t.Dims)))
		for _, d := range t.Dims {
			bw.u64(d)
		}
		id := uint32(t.Type)
		if magic == "PWRI" && t.Type == ops.I32 {
			id = powerInferI32
		}
		bw.u32(id)
		bw.u64(t.Offset)
	}
	bw.pad(align)
	var done uint64
	for _, t := range w.tensors {
		bw.zeros(t.Offset - done)
		done = t.Offset
		cw := &countWriter{w: bw.w, limit: t.Size, report: func(n uint64) {
			if progress != nil {
				progress(int64(done+n), int64(total))
			}
		}}
		if bw.err != nil {
			return bw.err
		}
		if err := t.write(cw); err != nil {
			return fmt.Errorf("tensor %q: %w", t.Name, err)
		}
		if cw.n != t.Size {
			return fmt.Errorf("tensor %q: wrote %d bytes, want %d", t.Name, cw.n, t.Size)
		}
		done += t.Size
	}
	bw.zeros(total - done)
	if bw.err != nil {
		return bw.err
	}
	if progress != nil && total > 0 {
		progress(int64(total), int64(total))
	}
	return bw.w.Flush()
}

// powerInferI32 is the id PowerInfer's files give I32 (ops.FromPowerInfer maps it back).
const powerInferI32 = 18

// countWriter enforces the declared tensor size while passing data through.
type countWriter struct {
	w      io.Writer
	n      uint64
	limit  uint64
	report func(n uint64)
}

func (c *countWriter) Write(p []byte) (int, error) {
	if uint64(len(p)) > c.limit-c.n {
		return 0, fmt.Errorf("write of %d bytes overruns the declared size %d (already %d)", len(p), c.limit, c.n)
	}
	k, err := c.w.Write(p)
	c.n += uint64(k)
	c.report(c.n)
	return k, err
}

// encoder keeps the first error so the header can be written without
// checking every call.
type encoder struct {
	w   *bufio.Writer
	pos uint64
	err error
	buf [8]byte
}

func (e *encoder) raw(p []byte) {
	if e.err == nil {
		_, e.err = e.w.Write(p)
		e.pos += uint64(len(p))
	}
}

func (e *encoder) u32(v uint32) { binary.LittleEndian.PutUint32(e.buf[:], v); e.raw(e.buf[:4]) }
func (e *encoder) u64(v uint64) { binary.LittleEndian.PutUint64(e.buf[:], v); e.raw(e.buf[:8]) }
func (e *encoder) str(s string) { e.u64(uint64(len(s))); e.raw([]byte(s)) }

func (e *encoder) zeros(n uint64) {
	var z [256]byte
	for n > 0 {
		k := min(n, uint64(len(z)))
		e.raw(z[:k])
		n -= k
	}
}

func (e *encoder) pad(align uint64) { e.zeros(alignUp(e.pos, align) - e.pos) }

// value writes v without its type tag; an array is its element type, count
// and elements, and an element of a nested array is itself such an array.
func (e *encoder) value(v Value) {
	switch x := v.V.(type) {
	case string:
		e.str(x)
	case []string:
		e.u32(uint32(String))
		e.u64(uint64(len(x)))
		for _, s := range x {
			e.str(s)
		}
	case []Value:
		e.u32(uint32(Array))
		e.u64(uint64(len(x)))
		for _, a := range x {
			e.value(a)
		}
	default:
		if v.Type == Array {
			e.u32(uint32(v.Elem))
			e.u64(uint64(reflect.ValueOf(x).Len()))
		}
		b, err := binary.Append(nil, binary.LittleEndian, x)
		if err != nil && e.err == nil {
			e.err = err
		}
		e.raw(b)
	}
}
