package ops

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func runOp(t *testing.T, name string, a Attrs, w []*Weight, in ...*Tensor) (*Tensor, error) {
	t.Helper()
	op, ok := Lookup(name)
	require.True(t, ok, name)
	full := Attrs{}
	for _, s := range op.Attrs {
		full[s.Name] = s.Default
	}
	for k, v := range a {
		full[k] = v
	}
	widths := make([]int, len(in))
	for i, x := range in {
		widths[i] = x.Cols
	}
	cols, err := op.Shape(&ShapeArgs{In: widths, W: w, A: full})
	if err != nil {
		return nil, err
	}
	out := &Tensor{Rows: in[0].Rows, Cols: cols, Data: make([]float32, in[0].Rows*cols)}
	return out, op.Run(&Ctx{In: in, Out: out, W: w, A: full})
}

// A row of 0..11 as Falcon-7B's fused q (8 wide), k (2) and v (2).
func TestSliceFusedQKV(t *testing.T) {
	x := &Tensor{Rows: 2, Cols: 12, Data: make([]float32, 24)}
	for i := range x.Data {
		x.Data[i] = float32(i)
	}
	cases := []struct {
		a    Attrs
		want []float32
	}{
		{Attrs{"len": 8}, []float32{0, 1, 2, 3, 4, 5, 6, 7, 12, 13, 14, 15, 16, 17, 18, 19}},
		{Attrs{"start": 8}, []float32{8, 9, 10, 11, 20, 21, 22, 23}},
		{Attrs{"start": 8, "parts": 2, "part": 0}, []float32{8, 9, 20, 21}},
		{Attrs{"start": 8, "parts": 2, "part": 1}, []float32{10, 11, 22, 23}},
		{Attrs{"start": 2, "len": 3}, []float32{2, 3, 4, 14, 15, 16}},
	}
	for _, c := range cases {
		out, err := runOp(t, "slice", c.a, nil, x)
		require.NoError(t, err)
		require.Equal(t, c.want, out.Data, "%v", c.a)
	}
}

func TestSliceErrors(t *testing.T) {
	x := &Tensor{Rows: 1, Cols: 12, Data: make([]float32, 12)}
	for _, c := range []struct {
		a    Attrs
		want string
	}{
		{Attrs{"start": 12}, "start 12 is outside the input's 12 columns"},
		{Attrs{"start": 8, "len": 5}, "columns [8, 8+5) do not fit the input's 12 columns"},
		{Attrs{"len": 0}, "columns [0, 0+0)"},
		{Attrs{"parts": 2, "part": 2}, "part 2 of 2"},
		{Attrs{"start": 3, "parts": 2}, "9 columns do not split into 2 equal parts"},
	} {
		_, err := runOp(t, "slice", c.a, nil, x)
		require.ErrorContains(t, err, c.want)
	}
}
