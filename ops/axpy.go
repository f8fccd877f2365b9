package ops

import "fmt"

// AxpyRow adds a · row i to y (len(y) == Cols): the down projection of one
// active neuron, read from a neuron-major (transposed) matrix.
func (m *Matrix) AxpyRow(i int, a float32, y []float32) {
	row := m.Row(i)
	y = y[:m.Cols]
	switch m.Type {
	case F32, F16, BF16:
		var buf [256]float32
		for off := 0; off < m.Cols; off += len(buf) {
			n := min(len(buf), m.Cols-off)
			m.decodeSpan(row, off, buf[:n])
			Axpy(y[off:off+n], a, buf[:n])
		}
	default:
		var blk [32]float32
		bb := m.Type.BlockBytes()
		for b := 0; b < m.Cols/32; b++ {
			if err := Dequantize(m.Type, blk[:], row[b*bb:(b+1)*bb]); err != nil {
				panic(err)
			}
			Axpy(y[b*32:b*32+32], a, blk[:])
		}
	}
}

// decodeSpan converts elements [off, off+len(dst)) of a plain-typed row.
func (m *Matrix) decodeSpan(row []byte, off int, dst []float32) {
	eb := m.Type.BlockBytes()
	if err := Dequantize(m.Type, dst, row[off*eb:(off+len(dst))*eb]); err != nil {
		panic(err)
	}
}

// Transpose returns mᵀ in new memory: f32, f16 and bf16 keep their type,
// quantized types become q8_0 (whose blocks need Rows to be a multiple of 32).
func Transpose(m *Matrix) (*Matrix, error) {
	t := m.Type
	if t != F32 && t != F16 && t != BF16 {
		t = Q8_0
	}
	rowBytes, err := t.RowBytes(m.Rows)
	if err != nil {
		return nil, fmt.Errorf("cannot transpose %dx%d to %s: %v", m.Rows, m.Cols, t, err)
	}
	src := make([]float32, m.Rows*m.Cols)
	for i := 0; i < m.Rows; i++ {
		m.RowF32(i, src[i*m.Cols:(i+1)*m.Cols])
	}
	data := make([]byte, rowBytes*m.Cols)
	col := make([]float32, m.Rows)
	for j := 0; j < m.Cols; j++ {
		for i := range col {
			col[i] = src[i*m.Cols+j]
		}
		if err := Quantize(t, data[j*rowBytes:(j+1)*rowBytes], col); err != nil {
			return nil, err
		}
	}
	return NewMatrix(t, m.Cols, m.Rows, data)
}
