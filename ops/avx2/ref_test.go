package avx2

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
)

// Independent float64 references: the tests decode every layout here, with
// their own f16 decoder, and never call the package's kernels or helpers.

type kind int

const (
	kF32 kind = iota
	kF16
	kQ8
	kQ4
)

var kindNames = []string{"f32", "f16", "q8_0", "q4_0"}

func (k kind) String() string { return kindNames[k] }

func (k kind) rowBytes(cols int) int {
	switch k {
	case kF32:
		return cols * 4
	case kF16:
		return cols * 2
	case kQ8:
		return cols / 32 * 34
	}
	return cols / 32 * 18
}

func refHalf(h uint16) float64 {
	e := int(h>>10) & 31
	m := float64(h & 0x3ff)
	var v float64
	switch e {
	case 31:
		if m != 0 {
			return math.NaN()
		}
		v = math.Inf(1)
	case 0:
		v = math.Ldexp(m, -24)
	default:
		v = math.Ldexp(1+m/1024, e-15)
	}
	if h&0x8000 != 0 {
		v = -v
	}
	return v
}

func le16(b []byte) uint16 { return binary.LittleEndian.Uint16(b) }

// refRow decodes one row of cols elements to float64.
func refRow(k kind, row []byte, cols int) []float64 {
	out := make([]float64, cols)
	switch k {
	case kF32:
		for i := range out {
			out[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(row[4*i:])))
		}
	case kF16:
		for i := range out {
			out[i] = refHalf(le16(row[2*i:]))
		}
	case kQ8:
		for b := 0; b < cols/32; b++ {
			blk := row[34*b:]
			d := refHalf(le16(blk))
			for j := 0; j < 32; j++ {
				out[32*b+j] = d * float64(int8(blk[2+j]))
			}
		}
	case kQ4:
		for b := 0; b < cols/32; b++ {
			blk := row[18*b:]
			d := refHalf(le16(blk))
			for j := 0; j < 16; j++ {
				out[32*b+j] = d * float64(int(blk[2+j]&0xf)-8)
				out[32*b+16+j] = d * float64(int(blk[2+j]>>4)-8)
			}
		}
	}
	return out
}

// refQ8 decodes activations quantized as q8_0.
func refQ8(xq []byte) []float64 { return refRow(kQ8, xq, len(xq)/34*32) }

// randHalf is a random f16 bit pattern of moderate magnitude (about 2^-6..4).
func randHalf(r *rand.Rand) uint16 {
	return uint16(r.IntN(2))<<15 | uint16(9+r.IntN(9))<<10 | uint16(r.IntN(1024))
}

// randMatrix fills nrows rows of random weights, placed off bytes into the
// returned buffer so that the kernels see unaligned rows.
func randMatrix(r *rand.Rand, k kind, nrows, cols, off int) []byte {
	rb := k.rowBytes(cols)
	buf := make([]byte, off+nrows*rb)
	w := buf[off:]
	switch k {
	case kF32:
		for i := 0; i < len(w); i += 4 {
			binary.LittleEndian.PutUint32(w[i:], math.Float32bits(float32(r.NormFloat64())))
		}
	case kF16:
		for i := 0; i < len(w); i += 2 {
			binary.LittleEndian.PutUint16(w[i:], randHalf(r))
		}
	case kQ8, kQ4:
		bs := 34
		if k == kQ4 {
			bs = 18
		}
		for i := 0; i < len(w); i += bs {
			binary.LittleEndian.PutUint16(w[i:], randHalf(r))
			for j := 2; j < bs; j++ {
				w[i+j] = byte(r.IntN(256))
			}
		}
	}
	return w
}

func randVec(r *rand.Rand, n int) []float32 {
	x := make([]float32, n+1)[1:] // not 32-byte aligned
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	return x
}

// rowSets are the index lists every kernel is tried with.
func rowSets(r *rand.Rand, nrows int) map[string][]int32 {
	sets := map[string][]int32{"nil": nil, "empty": {}, "single": {int32(r.IntN(nrows))}}
	perm := r.Perm(nrows)
	n := 1 + r.IntN(nrows)
	sorted := make([]int32, 0, n)
	for i := 0; i < nrows && len(sorted) < n; i++ {
		if r.IntN(nrows) < n {
			sorted = append(sorted, int32(i))
		}
	}
	sets["sorted"] = sorted
	unsorted := make([]int32, 0, 7)
	for _, p := range perm[:min(7, nrows)] {
		unsorted = append(unsorted, int32(p))
	}
	sets["unsorted"] = unsorted
	dup := []int32{int32(perm[0]), int32(perm[0]), int32(nrows - 1), 0, int32(perm[0])}
	sets["duplicates"] = dup
	return sets
}
