// Package ops holds the tensor and dtype types, the operator registry and the
// portable Go kernels that define what each operator means. Faster backends
// (ops/avx2, ops/cuda) are tested against these kernels.
package ops

import "fmt"

// DType is a weight element type, numbered as GGML numbers it in GGUF files.
type DType uint32

const (
	F32  DType = 0
	F16  DType = 1
	Q4_0 DType = 2
	Q4_1 DType = 3
	Q5_0 DType = 6
	Q5_1 DType = 7
	Q8_0 DType = 8
	Q8_1 DType = 9
	Q2_K DType = 10
	Q3_K DType = 11
	Q4_K DType = 12
	Q5_K DType = 13
	Q6_K DType = 14
	Q8_K DType = 15
	I8   DType = 24
	I16  DType = 25
	I32  DType = 26
	I64  DType = 27
	F64  DType = 28
	BF16 DType = 30
)

// IQ3_XXS is today's meaning of id 18; PowerInfer's files use 18 for I32.
const powerInferI32 DType = 18

type dtypeInfo struct {
	name       string
	blockElems int // elements per block
	blockBytes int // bytes per block
	supported  bool
}

var dtypes = map[DType]dtypeInfo{
	F32:  {"f32", 1, 4, true},
	F16:  {"f16", 1, 2, true},
	BF16: {"bf16", 1, 2, true},
	Q8_0: {"q8_0", 32, 34, true},
	Q4_0: {"q4_0", 32, 18, true},
	I32:  {"i32", 1, 4, true},
	Q4_1: {"q4_1", 32, 20, false},
	Q5_0: {"q5_0", 32, 22, false},
	Q5_1: {"q5_1", 32, 24, false},
	Q8_1: {"q8_1", 32, 36, false},
	Q2_K: {"q2_K", 256, 84, false},
	Q3_K: {"q3_K", 256, 110, false},
	Q4_K: {"q4_K", 256, 144, false},
	Q5_K: {"q5_K", 256, 176, false},
	Q6_K: {"q6_K", 256, 210, false},
	Q8_K: {"q8_K", 256, 292, false},
	I8:   {"i8", 1, 1, false},
	I16:  {"i16", 1, 2, false},
	I64:  {"i64", 1, 8, false},
	F64:  {"f64", 1, 8, false},
}

// Known reports whether the type id is one whose block layout is known.
func (t DType) Known() bool { _, ok := dtypes[t]; return ok }

// Supported reports whether pinfer can read this type's data.
func (t DType) Supported() bool { return dtypes[t].supported }

func (t DType) String() string {
	if i, ok := dtypes[t]; ok {
		return i.name
	}
	return fmt.Sprintf("dtype(%d)", uint32(t))
}

// BlockElems is the number of elements one block holds (1 for plain types).
func (t DType) BlockElems() int { return dtypes[t].blockElems }

// BlockBytes is the size in bytes of one block.
func (t DType) BlockBytes() int { return dtypes[t].blockBytes }

// RowBytes returns the bytes taken by n elements, or an error when n does not
// fill whole blocks.
func (t DType) RowBytes(n int) (int, error) {
	i, ok := dtypes[t]
	if !ok {
		return 0, fmt.Errorf("unknown dtype id %d", uint32(t))
	}
	if n%i.blockElems != 0 {
		return 0, fmt.Errorf("%d elements of %s do not fill whole blocks of %d", n, i.name, i.blockElems)
	}
	return n / i.blockElems * i.blockBytes, nil
}

// ParseDType maps a name such as "q8_0" to its type.
func ParseDType(name string) (DType, error) {
	for t, i := range dtypes {
		if i.name == name {
			return t, nil
		}
	}
	return 0, fmt.Errorf("unknown dtype %q", name)
}

// FromPowerInfer maps a type id read from a PowerInfer (PWRI) file, where 18
// still meant I32, to today's numbering.
func FromPowerInfer(id uint32) DType {
	if DType(id) == powerInferI32 {
		return I32
	}
	return DType(id)
}
