// Package quantize decides which type each tensor of a GGUF file gets for a
// file type (one rule for `pinfer convert --type` and `pinfer quantize`),
// and rewrites a GGUF or PowerInfer file with its tensors in another type,
// as llama.cpp's llama-quantize does.
package quantize

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/pinfer/pinfer/ops"
)

// types are the file types pinfer writes, in the order messages list them.
var types = []ops.DType{ops.F32, ops.F16, ops.BF16, ops.Q8_0, ops.Q4_0}

// fileTypes are llama.cpp's general.file_type ids (enum llama_ftype:
// LLAMA_FTYPE_ALL_F32 0, MOSTLY_F16 1, MOSTLY_Q4_0 2, MOSTLY_Q8_0 7,
// MOSTLY_BF16 32).
var fileTypes = map[ops.DType]uint32{ops.F32: 0, ops.F16: 1, ops.Q4_0: 2, ops.Q8_0: 7, ops.BF16: 32}

// FileType is the general.file_type id of a file whose matrices are t.
func FileType(t ops.DType) (uint32, bool) {
	id, ok := fileTypes[t]
	return id, ok
}

// IsQuantized reports whether t stores blocks of elements with a shared
// scale (q8_0, q4_0, the k-quants...), rather than one number each.
func IsQuantized(t ops.DType) bool { return t.Known() && t.BlockElems() > 1 }

// ParseType reads a file type as llama-quantize takes it: a name in any case
// (f32, F16, bf16, Q8_0, q4_0) or llama.cpp's numeric id for it (0, 1, 32,
// 7, 2).
func ParseType(s string) (ops.DType, error) {
	name := strings.ToLower(strings.TrimSpace(s))
	for _, t := range types {
		if t.String() == name {
			return t, nil
		}
	}
	if id, err := strconv.ParseUint(name, 10, 32); err == nil {
		for t, fid := range fileTypes {
			if uint64(fid) == id {
				return t, nil
			}
		}
	}
	return 0, fmt.Errorf("type %q is not supported; pinfer writes %s", s, supported())
}

// supported lists the types and their llama.cpp ids for messages.
func supported() string {
	var s []string
	for _, t := range types {
		s = append(s, fmt.Sprintf("%s (%d)", t, fileTypes[t]))
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}

// TensorType is the type that the tensor name of GGML dims (dims[0] the row
// length) gets in a file of type want: want for matrices, f32 for vectors
// (norms and biases: tiny and precision-sensitive) and for the matrices
// llama.cpp's converter and llama-quantize never quantize (keepF32), and
// f16 for a matrix whose rows do not fill want's blocks (a row length that
// is not a multiple of 32 for q8_0 and q4_0). note, when not empty, says
// why a matrix did not get want.
//
// PowerInfer's tensors follow the same rule: ffn_down_t is a matrix like
// ffn_down, and so are the predictors fc1 and fc2. PowerInfer's converter
// writes them in the file's type, and its llama-quantize gives them q4_0 in
// a q4_0 file (with --pure, the file's type in any); `pinfer gen` writes
// them in its --type, and the engine repacks q4_0 predictors at load for
// its AVX2 mat-vec. They run whole for every token, so their bytes count
// as much as attention's. `pinfer predictor train` writes f16 (the
// precision its folded cut is fitted at), which quantizing takes down with
// the rest: on the Shakespeare model with trained predictors, q4_0 ones
// keep a mean recall of 0.995 where f16 ones on the same q4_0 weights keep
// 0.998, at 3.5 times fewer bytes.
func TensorType(name string, dims []uint64, want ops.DType) (typ ops.DType, note string) {
	switch {
	case len(dims) < 2 || keepF32(name):
		return ops.F32, ""
	case dims[0]%uint64(max(1, want.BlockElems())) != 0:
		return ops.F16, fmt.Sprintf("row length %d is not a multiple of %d, writing f16 instead of %s", dims[0], want.BlockElems(), want)
	}
	return want, ""
}

// keepF32 names the matrices llama.cpp's converter (and llama-quantize)
// always keeps in f32, whatever the output type: the MoE router, whose
// small logits pick the experts, and the learned position table.
func keepF32(name string) bool {
	return strings.HasSuffix(name, ".ffn_gate_inp.weight") || name == "position_embd.weight"
}
