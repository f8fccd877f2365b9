package cuda

import (
	"fmt"

	"github.com/pinfer/pinfer/ops"
)

// Layout says how a weight matrix lies in device memory. Each row starts on
// a 16-byte boundary so the kernels load it in aligned 16-byte vectors. A
// q8_0 or q4_0 row holds the quants of all its blocks first (QBytes) and then
// the blocks' f16 scales: GGML's 34- and 18-byte blocks would misalign every
// vector load.
type Layout struct {
	Type       ops.DType
	Rows, Cols int
	Stride     int // bytes from one row to the next
	QBytes     int // bytes before the scales; the row's bytes for f32 and f16
}

// quantBlock gives, for the quantized types, the bytes of quants per block.
func quantBlock(t ops.DType) int {
	switch t {
	case ops.Q8_0:
		return 32
	case ops.Q4_0:
		return 16
	}
	return 0
}

// NewLayout checks that the kernels handle t and computes the row geometry.
func NewLayout(t ops.DType, rows, cols int) (Layout, error) {
	l := Layout{Type: t, Rows: rows, Cols: cols}
	switch t {
	case ops.F32:
		l.QBytes = 4 * cols
		l.Stride = l.QBytes
	case ops.F16:
		l.QBytes = 2 * cols
		l.Stride = l.QBytes
	case ops.Q8_0, ops.Q4_0:
		if cols%32 != 0 {
			return l, fmt.Errorf("cuda: %s row of %d columns is not whole blocks of 32", t, cols)
		}
		l.QBytes = cols / 32 * quantBlock(t)
		l.Stride = l.QBytes + cols/32*2
	default:
		return l, fmt.Errorf("cuda: dtype %s has no GPU kernels (f32, f16, q8_0, q4_0 do)", t)
	}
	if rows < 0 || cols <= 0 {
		return l, fmt.Errorf("cuda: bad matrix shape %dx%d", rows, cols)
	}
	l.Stride = (l.Stride + 15) &^ 15
	return l, nil
}

// Bytes is the device memory the matrix takes.
func (l Layout) Bytes() int { return l.Rows * l.Stride }

// Pack copies rows of m (all of them when rows is nil; row r of the result
// is m's row rows[r]) into the device layout.
func Pack(m *ops.Matrix, rows []int32) (Layout, []byte, error) {
	n := m.Rows
	if rows != nil {
		n = len(rows)
	}
	l, err := NewLayout(m.Type, n, m.Cols)
	if err != nil {
		return l, nil, err
	}
	out := make([]byte, l.Bytes())
	qb := quantBlock(m.Type)
	for r := 0; r < n; r++ {
		src := r
		if rows != nil {
			src = int(rows[r])
			if src < 0 || src >= m.Rows {
				return l, nil, fmt.Errorf("cuda: row %d of a %d-row matrix", src, m.Rows)
			}
		}
		in, dst := m.Row(src), out[r*l.Stride:]
		if qb == 0 {
			copy(dst, in)
			continue
		}
		bb := m.Type.BlockBytes()
		for b := 0; b < m.Cols/32; b++ {
			blk := in[b*bb : (b+1)*bb]
			copy(dst[2*b+l.QBytes:], blk[:2])
			copy(dst[b*qb:], blk[2:])
		}
	}
	return l, out, nil
}
