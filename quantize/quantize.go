package quantize

import (
	"fmt"
	"io"
	"runtime"
	"sync"

	"github.com/pinfer/pinfer/gguf"
	"github.com/pinfer/pinfer/internal/outpath"
	"github.com/pinfer/pinfer/ops"
)

// Options say how to rewrite a file.
type Options struct {
	// Type is the file type: the type of its matrices, as TensorType
	// decides for each tensor.
	Type ops.DType
	// AllowRequantize lets an already quantized tensor be quantized again
	// (llama-quantize's --allow-requantize); without it that is an error.
	AllowRequantize bool
	// LeaveOutput copies output.weight as it is (--leave-output-tensor).
	LeaveOutput bool
	// Threads quantize a tensor's rows; 0 or less: one per CPU.
	Threads int
	// Progress, when not nil, is called as output bytes are written.
	Progress func(done, total int64)
}

// Tensor says what became of one tensor.
type Tensor struct {
	Name      string
	Dims      []uint64 // GGML order: Dims[0] is the row length
	From, To  ops.DType
	FromBytes uint64
	ToBytes   uint64
	Note      string // why a matrix did not get the file's type, if it did not
}

// Copied reports whether the tensor's bytes are the input's.
func (t Tensor) Copied() bool { return t.From == t.To }

// readable are the types whose rows ops.Dequantize decodes.
var readable = map[ops.DType]bool{ops.F32: true, ops.F16: true, ops.BF16: true, ops.Q8_0: true, ops.Q4_0: true}

// isInt reports integer tensors (PowerInfer's gpu_idx and gpu_bucket, any
// index table): they are copied as they are, whatever the file type.
func isInt(t ops.DType) bool {
	return t == ops.I8 || t == ops.I16 || t == ops.I32 || t == ops.I64
}

// Plan decides each tensor's type in f's order, reading no tensor data; it
// fails, naming the file and the tensor, on a tensor that would need
// requantizing without opt.AllowRequantize or whose type pinfer cannot
// read.
func Plan(f *gguf.File, opt Options) ([]Tensor, error) {
	if _, ok := FileType(opt.Type); !ok {
		return nil, fmt.Errorf("output type %s is not supported; pinfer writes %s", opt.Type, supported())
	}
	plan := make([]Tensor, 0, len(f.Tensors))
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		t := Tensor{Name: ti.Name, Dims: ti.Dims, From: ti.Type, To: ti.Type, FromBytes: ti.Size}
		// Integer tensors are indices, not weights; an empty tensor has
		// nothing to convert.
		if !isInt(ti.Type) && ti.Elems() > 0 && !(opt.LeaveOutput && ti.Name == "output.weight") {
			t.To, t.Note = TensorType(ti.Name, ti.Dims, opt.Type)
		}
		switch {
		case t.Copied():
		case IsQuantized(t.From) && !opt.AllowRequantize:
			return nil, fmt.Errorf("%s: tensor %q is %s already; quantizing it again to %s loses more than quantizing from f16 or f32 (--allow-requantize does it anyway)",
				f.Path, t.Name, t.From, t.To)
		case !readable[t.From]:
			return nil, fmt.Errorf("%s: tensor %q is %s, which pinfer cannot read to convert it to %s", f.Path, t.Name, t.From, t.To)
		}
		if !t.Copied() {
			rb, err := t.To.RowBytes(int(t.Dims[0]))
			if err != nil { // TensorType falls back to f16 first
				return nil, fmt.Errorf("%s: tensor %q: %v", f.Path, t.Name, err)
			}
			t.ToBytes = uint64(rb) * (ti.Elems() / t.Dims[0])
		} else {
			t.ToBytes = t.FromBytes
		}
		plan = append(plan, t)
	}
	return plan, nil
}

// File writes in's tensors to out in opt.Type, as Plan decides them, with
// in's metadata and alignment, general.file_type set to the new type's id
// and general.quantization_version to 2 when the output holds quantized
// tensors. The input stays mapped, each tensor is converted in batches of
// rows and the map's pages are released as they are used, so memory stays
// below a tensor's size whatever the model's (115 MB at most for a 1.1 GB
// f16 file whose largest tensor is 131 MB). out is
// written beside itself and renamed at the end: a failure leaves no file
// and an existing out untouched. out may not be in.
func File(in, out string, opt Options) ([]Tensor, error) {
	f, err := gguf.Open(in)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	plan, err := Plan(f, opt)
	if err != nil {
		return nil, err
	}
	if err := outpath.Check(out, outpath.Input{Name: "file", Path: in}); err != nil {
		return nil, fmt.Errorf("%s: %v", out, err)
	}
	w := gguf.NewWriter()
	w.Magic = f.Magic
	for _, kv := range f.KVs {
		if err := w.Set(kv.Key, kv.Value); err != nil {
			return nil, fmt.Errorf("%s: %v", in, err)
		}
	}
	ftype, _ := FileType(opt.Type)
	if err := w.Set("general.file_type", ftype); err != nil {
		return nil, err
	}
	for _, t := range plan {
		if IsQuantized(t.To) {
			if err := w.Set("general.quantization_version", uint32(2)); err != nil {
				return nil, err
			}
			break
		}
	}
	threads := opt.Threads
	if threads <= 0 {
		threads = runtime.NumCPU()
	}
	for i, t := range plan {
		ti := &f.Tensors[i]
		src := f.Data(ti)
		write := func(w io.Writer) error {
			var err error
			if t.Copied() {
				err = copyChunks(w, src, f.Release)
			} else {
				err = convertRows(w, src, t, threads, f.Release)
			}
			f.Release(f.Data(sinceLast(f, i)))
			return err
		}
		if err := w.AddTensor(t.Name, t.To, t.Dims, write); err != nil {
			return nil, fmt.Errorf("%s: %v", in, err)
		}
	}
	if err := w.WriteFile(out, opt.Progress); err != nil {
		return nil, err
	}
	return plan, nil
}

// sinceLast spans tensor i's data and the one's before it, when that comes
// first in the file: releasing the input map a tensor at a time (the
// kernel drops whole 2 MB pages of it) then also drops the page that holds
// the end of one tensor and the start of the next.
func sinceLast(f *gguf.File, i int) *gguf.TensorInfo {
	t := f.Tensors[i]
	if i > 0 {
		if p := f.Tensors[i-1]; p.Offset < t.Offset {
			t.Size += t.Offset - p.Offset
			t.Offset = p.Offset
		}
	}
	return &t
}

// chunk is how many output bytes are made and written at once.
const chunk = 4 << 20

// copyChunks writes src a chunk at a time, so that progress moves, and
// releases each chunk of the input map once written.
func copyChunks(w io.Writer, src []byte, release func([]byte)) error {
	for len(src) > 0 {
		n := min(len(src), chunk)
		if _, err := w.Write(src[:n]); err != nil {
			return err
		}
		release(src[:n])
		src = src[n:]
	}
	return nil
}

// convertRows decodes t's rows from src and encodes them as t.To, a batch of
// about chunk output bytes at a time, the batch's rows split over threads
// goroutines; each batch's input is released once written.
func convertRows(w io.Writer, src []byte, t Tensor, threads int, release func([]byte)) error {
	cols := int(t.Dims[0])
	inRow, err := t.From.RowBytes(cols)
	if err != nil {
		return err
	}
	outRow, err := t.To.RowBytes(cols)
	if err != nil {
		return err
	}
	rows := len(src) / inRow
	batch := max(1, chunk/outRow)
	// More goroutines than a batch has rows would have nothing to do: a
	// thread count past that (the user's NTHREADS may be any number) is
	// cut to it rather than given a scratch row each.
	threads = max(1, min(threads, batch, rows))
	buf := make([]byte, min(batch, rows)*outRow)
	scratch := make([][]float32, threads)
	for r0 := 0; r0 < rows; r0 += batch {
		n := min(batch, rows-r0)
		per := (n + threads - 1) / threads
		errs := make([]error, threads)
		var wg sync.WaitGroup
		for k := 0; k < threads && k*per < n; k++ {
			wg.Go(func() {
				if scratch[k] == nil {
					scratch[k] = make([]float32, cols)
				}
				row := scratch[k]
				for r := k * per; r < min(n, (k+1)*per); r++ {
					in := src[(r0+r)*inRow : (r0+r+1)*inRow]
					if err := ops.Dequantize(t.From, row, in); err != nil {
						errs[k] = err
						return
					}
					if err := ops.Quantize(t.To, buf[r*outRow:(r+1)*outRow], row); err != nil {
						errs[k] = err
						return
					}
				}
			})
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				return err
			}
		}
		if _, err := w.Write(buf[:n*outRow]); err != nil {
			return err
		}
		release(src[r0*inRow : (r0+n)*inRow])
	}
	return nil
}
