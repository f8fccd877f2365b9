package gguf

import (
	"fmt"
	"math"
	"strconv"

	"github.com/pinfer/pinfer/ops"
)

// ParamCount is general.parameter_count where the file gives one, else the
// elements of all its tensors.
func (f *File) ParamCount() uint64 {
	if n, err := f.Uint("general.parameter_count"); err == nil && n > 0 {
		return n
	}
	var n uint64
	for i := range f.Tensors {
		n += f.Tensors[i].Elems()
	}
	return n
}

// WeightType is the type most of the matrices' elements are stored in (the
// file's quantization as ollama names it; vectors, norms and biases do not
// count), the lower type on a tie; false for a file without matrices.
func (f *File) WeightType() (ops.DType, bool) {
	byType := map[ops.DType]uint64{}
	for i := range f.Tensors {
		if t := &f.Tensors[i]; len(t.Dims) >= 2 {
			byType[t.Type] += t.Elems()
		}
	}
	var typ ops.DType
	var most uint64
	for t, n := range byType {
		if n > most || n == most && t < typ {
			typ, most = t, n
		}
	}
	return typ, most > 0
}

// HumanCount writes a parameter count as ollama does (format.HumanNumber):
// billions with one decimal, millions with two, none when whole, thousands
// rounded: 6.43M, 8.03B -> "8.0B", 1B, 125M, 500.50M, 1K.
func HumanCount(n uint64) string {
	f := float64(n)
	switch {
	case n >= 1e9:
		if f/1e9 == math.Floor(f/1e9) {
			return fmt.Sprintf("%.0fB", f/1e9)
		}
		return fmt.Sprintf("%.1fB", f/1e9)
	case n >= 1e6:
		if f/1e6 == math.Floor(f/1e6) {
			return fmt.Sprintf("%.0fM", f/1e6)
		}
		return fmt.Sprintf("%.2fM", f/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.0fK", f/1e3)
	}
	return strconv.FormatUint(n, 10)
}
