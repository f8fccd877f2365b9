package ops

import (
	"encoding/binary"
	"fmt"
	"math"
)

// GGML's 32-element blocks: an f16 scale d, then the quants.
const (
	qk         = 32
	q8_0Bytes  = 2 + qk
	q4_0Bytes  = 2 + qk/2
	q4_0Offset = 8 // q4_0 stores q+8 in a nibble
)

func checkQuantLens(op string, t DType, nElems, nBytes int) error {
	switch t {
	case F32, F16, BF16, Q8_0, Q4_0:
	default:
		return fmt.Errorf("%s: dtype %s is not supported", op, t)
	}
	rb, err := t.RowBytes(nElems)
	if err != nil {
		return fmt.Errorf("%s %s: %v", op, t, err)
	}
	if nBytes != rb {
		return fmt.Errorf("%s %s: %d elements need %d bytes, got %d", op, t, nElems, rb, nBytes)
	}
	return nil
}

// Quantize encodes src as t into dst, whose length must be t.RowBytes(len(src)).
// Q8_0 and Q4_0 follow ggml's reference quantizers bit for bit, so files we
// write quantize as llama.cpp's tools would.
func Quantize(t DType, dst []byte, src []float32) error {
	if err := checkQuantLens("quantize", t, len(src), len(dst)); err != nil {
		return err
	}
	le := binary.LittleEndian
	switch t {
	case F32:
		for i, v := range src {
			le.PutUint32(dst[4*i:], math.Float32bits(v))
		}
	case F16:
		for i, v := range src {
			le.PutUint16(dst[2*i:], F32ToF16(v))
		}
	case BF16:
		for i, v := range src {
			le.PutUint16(dst[2*i:], F32ToBF16(v))
		}
	case Q8_0:
		for b := 0; b < len(src)/qk; b++ {
			quantizeQ8_0((*[q8_0Bytes]byte)(dst[b*q8_0Bytes:]), (*[qk]float32)(src[b*qk:]))
		}
	case Q4_0:
		for b := 0; b < len(src)/qk; b++ {
			quantizeQ4_0((*[q4_0Bytes]byte)(dst[b*q4_0Bytes:]), (*[qk]float32)(src[b*qk:]))
		}
	}
	return nil
}

func quantizeQ8_0(dst *[q8_0Bytes]byte, x *[qk]float32) {
	var amax float32
	for _, v := range x {
		amax = max(amax, float32(math.Abs(float64(v))))
	}
	d := amax / 127
	var id float32
	if d != 0 {
		id = 1 / d
	}
	// ggml scales by the float32 d, not by its f16 rounding.
	binary.LittleEndian.PutUint16(dst[0:], F32ToF16(d))
	for j, v := range x {
		dst[2+j] = byte(int8(math.Round(float64(v * id)))) // roundf: halves away from zero
	}
}

func quantizeQ4_0(dst *[q4_0Bytes]byte, x *[qk]float32) {
	// The signed extreme maps to -8, so the 16th level is spent on its side.
	var amax, vmax float32
	for _, v := range x {
		if a := float32(math.Abs(float64(v))); a > amax {
			amax, vmax = a, v
		}
	}
	d := vmax / -8
	var id float32
	if d != 0 {
		id = 1 / d
	}
	binary.LittleEndian.PutUint16(dst[0:], F32ToF16(d))
	for j := 0; j < qk/2; j++ {
		dst[2+j] = q4Nibble(x[j]*id) | q4Nibble(x[j+qk/2]*id)<<4
	}
}

// q4Nibble is ggml's MIN(15, (int8_t)(v + 8.5f)): truncation, not rounding.
func q4Nibble(v float32) byte {
	q := int32(v + 8.5)
	return byte(min(15, max(0, q)))
}

// Dequantize decodes src, encoded as t, into dst; len(src) must be
// t.RowBytes(len(dst)).
func Dequantize(t DType, dst []float32, src []byte) error {
	if err := checkQuantLens("dequantize", t, len(dst), len(src)); err != nil {
		return err
	}
	dequantizeRow(t, dst, src)
	return nil
}

// dequantizeRow trusts its caller to have checked the lengths.
func dequantizeRow(t DType, dst []float32, src []byte) {
	le := binary.LittleEndian
	switch t {
	case F32:
		for i := range dst {
			dst[i] = math.Float32frombits(le.Uint32(src[4*i:]))
		}
	case F16:
		for i := range dst {
			dst[i] = f16Table[le.Uint16(src[2*i:])]
		}
	case BF16:
		for i := range dst {
			dst[i] = BF16ToF32(le.Uint16(src[2*i:]))
		}
	case Q8_0:
		for b := 0; b < len(dst)/qk; b++ {
			blk := (*[q8_0Bytes]byte)(src[b*q8_0Bytes:])
			y := (*[qk]float32)(dst[b*qk:])
			d := f16Table[le.Uint16(blk[0:])]
			for j := range y {
				y[j] = float32(int8(blk[2+j])) * d
			}
		}
	case Q4_0:
		for b := 0; b < len(dst)/qk; b++ {
			blk := (*[q4_0Bytes]byte)(src[b*q4_0Bytes:])
			y := (*[qk]float32)(dst[b*qk:])
			d := f16Table[le.Uint16(blk[0:])]
			for j := 0; j < qk/2; j++ {
				y[j] = float32(int32(blk[2+j]&15)-q4_0Offset) * d
				y[j+qk/2] = float32(int32(blk[2+j]>>4)-q4_0Offset) * d
			}
		}
	}
}
