package safetensors

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzParse: any bytes either fail to parse with an error naming the file,
// or give tensors whose data lies inside the file and holds exactly
// shape×dtype bytes, which Decode converts where the dtype allows.
func FuzzParse(f *testing.F) {
	f.Add(encode(f, []rawTensor{
		{"a.weight", "F16", []int{2, 3}, u16s(1, 2, 3, 4, 5, 6)},
		{"b", "F32", []int{1}, []byte{0, 0, 128, 63}},
		{"c", "BF16", []int{}, u16s(0x3f80)},
		{"d", "I8", []int{0}, nil},
	}))
	f.Add([]byte("\x02\x00\x00\x00\x00\x00\x00\x00{}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		file, err := parse("fuzz.safetensors", b)
		if err != nil {
			require.Contains(t, err.Error(), "fuzz.safetensors")
			return
		}
		for _, name := range file.Names() {
			x, err := file.Tensor(name)
			require.NoError(t, err)
			n := 1
			for _, d := range x.Shape {
				n *= d
			}
			require.Equal(t, n*elemSize[x.DType], len(x.Data), name)
			switch x.DType {
			case "F32", "F16", "BF16":
				require.NoError(t, Decode(x.DType, make([]float32, n), x.Data))
			}
		}
	})
}
