package avx2

import (
	"encoding/binary"
	"math"
	"sync"
	"sync/atomic"
)

// The portable kernels: the whole API without assembly, and the column tails
// that the vector kernels leave (cols not a multiple of 8). They accumulate
// in float64, so they are at least as exact as the assembly.

func f32At(b []byte, i int) float32 {
	return math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
}

func f16At(b []byte, i int) float32 {
	return halfToFloat(binary.LittleEndian.Uint16(b[2*i:]))
}

func dotF32(row []byte, x []float32) float32 {
	var s float64
	for i, v := range x {
		s += float64(f32At(row, i)) * float64(v)
	}
	return float32(s)
}

func dotF16(row []byte, x []float32) float32 {
	var s float64
	for i, v := range x {
		s += float64(f16At(row, i)) * float64(v)
	}
	return float32(s)
}

func dotF32s(a, b []float32) float32 {
	var s float64
	for i, v := range a {
		s += float64(v) * float64(b[i])
	}
	return float32(s)
}

func axpyRowF32(y []float32, row []byte, c float32) {
	for i := range y {
		y[i] += c * f32At(row, i)
	}
}

func axpyRowF16(y []float32, row []byte, c float32) {
	for i := range y {
		y[i] += c * f16At(row, i)
	}
}

func goGatherQ8(out []float32, w []byte, nblk int, ids []int32, xq []byte) {
	stride := nblk * q8Block
	for k, r := range ids {
		row := w[int(r)*stride:][:stride]
		var s float64
		for b := 0; b < nblk; b++ {
			wb, xb := row[b*q8Block:][:q8Block], xq[b*q8Block:][:q8Block]
			var isum int32
			for j := 2; j < q8Block; j++ {
				isum += int32(int8(wb[j])) * int32(int8(xb[j]))
			}
			s += float64(isum) * float64(f16At(wb, 0)) * float64(f16At(xb, 0))
		}
		out[k] = float32(s)
	}
}

func goGatherQ4(out []float32, w []byte, nblk int, ids []int32, xq []byte) {
	stride := nblk * q4Block
	for k, r := range ids {
		row := w[int(r)*stride:][:stride]
		var s float64
		for b := 0; b < nblk; b++ {
			wb, xb := row[b*q4Block:][:q4Block], xq[b*q8Block:][:q8Block]
			var isum int32
			for j := 0; j < 16; j++ {
				lo, hi := int32(wb[2+j]&15)-8, int32(wb[2+j]>>4)-8
				isum += lo*int32(int8(xb[2+j])) + hi*int32(int8(xb[18+j]))
			}
			s += float64(isum) * float64(f16At(wb, 0)) * float64(f16At(xb, 0))
		}
		out[k] = float32(s)
	}
}

func goAxpyQ8(y []float32, w []byte, nblk int, ids []int32, coef []float32) {
	stride := nblk * q8Block
	for k, r := range ids {
		row := w[int(r)*stride:][:stride]
		for b := 0; b < nblk; b++ {
			wb := row[b*q8Block:][:q8Block]
			s := coef[k] * f16At(wb, 0)
			yb := y[32*b:][:32]
			for j := range yb {
				yb[j] += s * float32(int8(wb[2+j]))
			}
		}
	}
}

func goAxpyQ4(y []float32, w []byte, nblk int, ids []int32, coef []float32) {
	stride := nblk * q4Block
	for k, r := range ids {
		row := w[int(r)*stride:][:stride]
		for b := 0; b < nblk; b++ {
			wb := row[b*q4Block:][:q4Block]
			s := coef[k] * f16At(wb, 0)
			yb := y[32*b:][:32]
			for j := 0; j < 16; j++ {
				yb[j] += s * float32(int(wb[2+j]&15)-8)
				yb[16+j] += s * float32(int(wb[2+j]>>4)-8)
			}
		}
	}
}

func quantizeQ8(dst []byte, x []float32) {
	for b := 0; b < len(x)/32; b++ {
		xb, db := x[32*b:][:32], dst[b*q8Block:][:q8Block]
		var amax float32
		for _, v := range xb {
			amax = max(amax, float32(math.Abs(float64(v))))
		}
		d := amax / 127
		h := floatToHalf(d)
		// Where d rounds to 0 as f16 the block decodes to 0 whatever q
		// is, and 1/d may overflow: q = 0 then.
		var id float32
		if h&0x7fff != 0 {
			id = 1 / d
		}
		binary.LittleEndian.PutUint16(db, h)
		for j, v := range xb {
			db[2+j] = byte(int8(math.Round(float64(v * id))))
		}
	}
}

func halfToFloat(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	man := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	case exp != 0:
		return math.Float32frombits(sign | (exp+112)<<23 | man<<13)
	}
	f := float32(man) / (1 << 24) // subnormal (or zero): man * 2^-24
	if sign != 0 {
		f = -f
	}
	return f
}

// floatToHalf rounds to nearest even, as F16C does.
func floatToHalf(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23) & 0xff
	man := b & 0x7fffff
	if exp == 0xff {
		if man != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	}
	e := exp - 112
	if e >= 0x1f {
		return sign | 0x7c00
	}
	shift := uint(13)
	if e <= 0 {
		if e < -10 {
			return sign
		}
		man |= 0x800000
		shift = uint(14 - e)
		e = 0
	}
	m := man >> shift
	rem, half := man&(1<<shift-1), uint32(1)<<(shift-1)
	if rem > half || (rem == half && m&1 == 1) {
		m++ // may carry into the exponent, which is still the right encoding
	}
	return sign | (uint16(e)<<10 + uint16(m))
}

// Iota returns 0..n-1 from a shared table, so that an all-rows index list
// costs no allocation once the table is large enough. Callers must not
// write to it.
var (
	iotaTab  atomic.Pointer[[]int32]
	iotaGrow sync.Mutex
)

func Iota(n int) []int32 {
	if t := iotaTab.Load(); t != nil && len(*t) >= n {
		return (*t)[:n]
	}
	iotaGrow.Lock()
	defer iotaGrow.Unlock()
	if t := iotaTab.Load(); t != nil && len(*t) >= n {
		return (*t)[:n]
	}
	t := make([]int32, max(n, 4096))
	for i := range t {
		t[i] = int32(i)
	}
	iotaTab.Store(&t)
	return t[:n]
}

func goGatherQ8F(out []float32, w []byte, nblk int, ids []int32, x []float32) {
	stride := nblk * q8Block
	for k, r := range ids {
		row := w[int(r)*stride:][:stride]
		var s float64
		for b := 0; b < nblk; b++ {
			wb, xb := row[b*q8Block:][:q8Block], x[32*b:][:32]
			var bs float64
			for j, v := range xb {
				bs += float64(int8(wb[2+j])) * float64(v)
			}
			s += bs * float64(f16At(wb, 0))
		}
		out[k] = float32(s)
	}
}
