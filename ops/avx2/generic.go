package avx2

import (
	"encoding/binary"
	"math"
	"sync"
	"sync/atomic"

	"github.com/pinfer/pinfer/ops/half"
)

// The portable kernels: the whole API without assembly, and the column tails
// that the vector kernels leave (cols not a multiple of 8). They accumulate
// in float64, so they are at least as exact as the assembly.

func f32At(b []byte, i int) float32 {
	return math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
}

func f16At(b []byte, i int) float32 {
	return half.Decode(binary.LittleEndian.Uint16(b[2*i:]))
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
		h := half.Encode(d)
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
