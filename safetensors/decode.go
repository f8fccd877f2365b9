package safetensors

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/pinfer/pinfer/ops"
)

// Decode converts little-endian F32, F16 or BF16 elements in src to dst,
// which must hold exactly len(src)/elemsize values. Callers that stream a
// tensor row by row use it on slices of Tensor.Data.
func Decode(dtype string, dst []float32, src []byte) error {
	size, ok := elemSize[dtype]
	if !ok || (dtype != "F32" && dtype != "F16" && dtype != "BF16") {
		return fmt.Errorf("dtype %q cannot be decoded to float32 (want F32, F16 or BF16)", dtype)
	}
	if len(src) != len(dst)*size {
		return fmt.Errorf("%d bytes of %s do not make %d values", len(src), dtype, len(dst))
	}
	switch dtype {
	case "F32":
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
		}
	case "F16":
		for i := range dst {
			dst[i] = ops.F16ToF32(binary.LittleEndian.Uint16(src[2*i:]))
		}
	case "BF16":
		for i := range dst {
			dst[i] = ops.BF16ToF32(binary.LittleEndian.Uint16(src[2*i:]))
		}
	}
	return nil
}
