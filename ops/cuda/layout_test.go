package cuda

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/pinfer/pinfer/ops"
)

// unpack decodes row r of the device layout by the rules Layout documents.
func unpack(l Layout, data []byte, r int) []float32 {
	row := data[r*l.Stride:]
	out := make([]float32, l.Cols)
	for i := range out {
		switch l.Type {
		case ops.F32:
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(row[4*i:]))
		case ops.F16:
			out[i] = ops.F16ToF32(binary.LittleEndian.Uint16(row[2*i:]))
		case ops.Q8_0, ops.Q4_0:
			b, j := i/32, i%32
			d := ops.F16ToF32(binary.LittleEndian.Uint16(row[l.QBytes+2*b:]))
			if l.Type == ops.Q8_0 {
				out[i] = d * float32(int8(row[32*b+j]))
			} else if j < 16 {
				out[i] = d * float32(int(row[16*b+j]&15)-8)
			} else {
				out[i] = d * float32(int(row[16*b+j-16]>>4)-8)
			}
		}
	}
	return out
}

func TestPack(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	for _, typ := range []ops.DType{ops.F32, ops.F16, ops.Q8_0, ops.Q4_0} {
		rows, cols := 37, 96
		rb, _ := typ.RowBytes(cols)
		data := make([]byte, rows*rb)
		for i := range rows {
			v := make([]float32, cols)
			for j := range v {
				v[j] = float32(r.NormFloat64())
			}
			ops.Quantize(typ, data[i*rb:], v)
		}
		m, err := ops.NewMatrix(typ, rows, cols, data)
		if err != nil {
			t.Fatal(err)
		}
		for _, sel := range [][]int32{nil, {5, 0, 36}} {
			l, packed, err := Pack(m, sel)
			if err != nil {
				t.Fatal(err)
			}
			if l.Stride%16 != 0 || len(packed) != l.Rows*l.Stride {
				t.Fatalf("%s: stride %d, %d bytes for %d rows", typ, l.Stride, len(packed), l.Rows)
			}
			want := make([]float32, cols)
			for k := range l.Rows {
				src := k
				if sel != nil {
					src = int(sel[k])
				}
				m.RowF32(src, want)
				got := unpack(l, packed, k)
				for i := range want {
					if got[i] != want[i] {
						t.Fatalf("%s row %d (source %d) element %d: %g, want %g", typ, k, src, i, got[i], want[i])
					}
				}
			}
		}
	}
	if _, _, err := Pack(&ops.Matrix{Type: ops.BF16, Rows: 1, Cols: 32, Data: make([]byte, 64)}, nil); err == nil {
		t.Fatal("bf16 packed without error")
	}
	m := &ops.Matrix{Type: ops.F32, Rows: 2, Cols: 4, Data: make([]byte, 32)}
	if _, _, err := Pack(m, []int32{2}); err == nil {
		t.Fatal("row 2 of a 2-row matrix packed without error")
	}
}
