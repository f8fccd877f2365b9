//go:build cuda

package cuda

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"testing"

	"github.com/pinfer/pinfer/ops"
)

// The step kernels against the portable ops: q8_0 rounding bit for bit,
// the fused add + norm, the mask compaction, the FFN with its row count in
// device memory, and the embedding row.

func downBytes(t testing.TB, d *Device, b *Buffer, n int) []byte {
	f := down(t, d, b, (n+3)/4)
	out := make([]byte, 4*len(f))
	for i, v := range f {
		binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(v))
	}
	return out[:n]
}

func TestQuantize(t *testing.T) {
	d := open(t)
	r := rand.New(rand.NewPCG(11, uint64(os.Getpid())))
	n := 32 * 77
	x := randVec(r, n)
	x[5], x[40] = 0, 1e-30 // an all-but-zero block stays finite
	for i := 64; i < 96; i++ {
		x[i] = 0
	}
	xq, err := d.AllocQX(n)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Free(xq.Buf)
	if err := d.Quantize(xq, upF32(t, d, x)); err != nil {
		t.Fatal(err)
	}
	got := downBytes(t, d, xq.Buf, n/32*40)
	want := make([]byte, n/32*34)
	if err := ops.Quantize(ops.Q8_0, want, x); err != nil {
		t.Fatal(err)
	}
	nb := n / 32
	for b := 0; b < nb; b++ {
		blk := want[b*34:]
		sum := 0
		for j := 0; j < 32; j++ {
			q := int8(blk[2+j])
			var g int8
			if j < 16 {
				g = int8(got[b*16+j])
			} else {
				g = int8(got[nb*16+b*16+j-16])
			}
			if g != q {
				t.Fatalf("block %d element %d: %d, want %d", b, j, g, q)
			}
			sum += int(q)
		}
		dv := math.Float32frombits(binary.LittleEndian.Uint32(got[nb*32+4*b:]))
		if wd := ops.F16ToF32(binary.LittleEndian.Uint16(blk)); dv != wd {
			t.Fatalf("block %d scale %g, want %g", b, dv, wd)
		}
		if s := int32(binary.LittleEndian.Uint32(got[nb*36+4*b:])); int(s) != sum {
			t.Fatalf("block %d sum %d, want %d", b, s, sum)
		}
	}
}

func TestNorm(t *testing.T) {
	d := open(t)
	r := rand.New(rand.NewPCG(12, uint64(os.Getpid())))
	for trial := range trials(8) {
		n := 32 * (1 + r.IntN(200))
		layer := trial%2 == 1
		x, b, w, bias := randVec(r, n), randVec(r, n), randVec(r, n), randVec(r, n)
		v := make([]float32, n)
		for i := range v {
			v[i] = x[i] + b[i]
		}
		want := make([]float32, n)
		var bb *Buffer
		if layer {
			ops.LayerNorm(want, v, w, bias, 1e-5)
			bb = upF32(t, d, bias)
		} else {
			ops.RMSNorm(want, v, w, 1e-5)
		}
		out, sum := upF32(t, d, nanVec(n)), upF32(t, d, nanVec(n))
		oq, _ := d.AllocQX(n)
		sq, _ := d.AllocQX(n)
		if err := d.Norm(out, oq, upF32(t, d, x), upF32(t, d, b), sum, sq, upF32(t, d, w), bb, n, 1e-5, layer); err != nil {
			t.Fatal(err)
		}
		got, gs := down(t, d, out, n), down(t, d, sum, n)
		for i := range want {
			within(t, "norm", i, float64(got[i]), float64(want[i]), math.Abs(float64(want[i])), 1e-5)
			if gs[i] != v[i] {
				t.Fatalf("norm's sum[%d] = %g, want %g", i, gs[i], v[i])
			}
		}
		// The quantized outputs are the rounding of what was written.
		for _, c := range []struct {
			q   *QX
			src []float32
		}{{oq, got}, {sq, v}} {
			wq := make([]byte, n/32*34)
			ops.Quantize(ops.Q8_0, wq, c.src)
			gq := downBytes(t, d, c.q.Buf, n/32*40)
			nb := n / 32
			for blk := 0; blk < nb; blk++ {
				for j := 0; j < 32; j++ {
					g := gq[blk*16+j]
					if j >= 16 {
						g = gq[nb*16+blk*16+j-16]
					}
					if g != wq[blk*34+2+j] {
						t.Fatalf("norm's q8_0 block %d element %d differs", blk, j)
					}
				}
			}
		}
		d.Free(oq.Buf)
		d.Free(sq.Buf)
	}
}

func TestCompact(t *testing.T) {
	d := open(t)
	r := rand.New(rand.NewPCG(13, uint64(os.Getpid())))
	total, _ := d.Alloc(8)
	defer d.Free(total)
	d.UploadF32(total, []float32{0, 0})
	var sum int
	for _, n := range []int{1, 31, 1000, 11008, 30000} {
		mask := make([]int32, n)
		var want []int32
		for i := range mask {
			if r.Float64() < 0.15 {
				mask[i] = 1
				want = append(want, int32(i))
			}
		}
		sum += len(want)
		idx, count := upI32(t, d, make([]int32, n)), upI32(t, d, []int32{-1})
		if err := d.Compact(idx, count, total, upI32(t, d, mask), n); err != nil {
			t.Fatal(err)
		}
		c := int(math.Float32bits(down(t, d, count, 1)[0]))
		if c != len(want) {
			t.Fatalf("n=%d: count %d, want %d", n, c, len(want))
		}
		got := downBytes(t, d, idx, 4*c)
		for k, id := range want {
			if g := int32(binary.LittleEndian.Uint32(got[4*k:])); g != id {
				t.Fatalf("n=%d: idx[%d] = %d, want %d", n, k, g, id)
			}
		}
	}
	tb := downBytes(t, d, total, 8)
	if got := int(binary.LittleEndian.Uint64(tb)); got != sum {
		t.Fatalf("total %d, want %d", got, sum)
	}
}

// The FFN as a step runs it: gate/up over the rows a device list names,
// its length in device memory, then the down axpy writing base + sum.
func TestStepFFN(t *testing.T) {
	d := open(t)
	r := rand.New(rand.NewPCG(14, uint64(os.Getpid())))
	for _, typ := range types {
		dim, nff := 256, 700
		gate, up, dn := randMatrix(t, r, typ, nff, dim), randMatrix(t, r, typ, nff, dim), randMatrix(t, r, typ, nff, dim)
		x, base := randVec(r, dim), randVec(r, dim)
		var ids []int32
		for i := 0; i < nff; i++ {
			if r.Float64() < 0.2 {
				ids = append(ids, int32(i))
			}
		}
		want := slices.Clone(base)
		mag := make([]float64, dim)
		w := make([]float32, dim)
		for _, id := range ids {
			g, _ := refDot(gate, int(id), x)
			u, _ := refDot(up, int(id), x)
			a := ops.FFNActivation("relu", 0, float32(g), float32(u))
			dn.RowF32(int(id), w)
			for c := range w {
				want[c] += a * w[c]
				mag[c] += math.Abs(float64(a) * float64(w[c]))
			}
		}
		var dm [3]*Matrix
		for i, m := range []*ops.Matrix{gate, up, dn} {
			var err error
			if dm[i], err = d.UploadMatrix(m, nil); err != nil {
				t.Fatal(err)
			}
		}
		xb := upF32(t, d, x)
		xq, _ := d.AllocQX(dim)
		d.Quantize(xq, xb)
		padded := append(slices.Clone(ids), make([]int32, nff-len(ids))...)
		idx, count := upI32(t, d, padded), upI32(t, d, []int32{int32(len(ids))})
		a, y := upF32(t, d, nanVec(nff)), upF32(t, d, nanVec(dim))
		if err := d.GateUp(a, dm[0], dm[1], xb, xq, idx, nff, count, nil, "relu", 0); err != nil {
			t.Fatal(err)
		}
		if err := d.AxpyN(y, dm[2], a, idx, nff, count, upF32(t, d, base), true); err != nil {
			t.Fatal(err)
		}
		got := down(t, d, y, dim)
		for c := range got {
			within(t, typ.String()+" step FFN", c, float64(got[c]), float64(want[c]), mag[c]+math.Abs(float64(base[c])), 1e-4)
		}
		for _, m := range dm {
			m.Free(d)
		}
		d.Free(xq.Buf)
	}
}

func TestEmbed(t *testing.T) {
	d := open(t)
	r := rand.New(rand.NewPCG(15, uint64(os.Getpid())))
	for _, typ := range types {
		m := randMatrix(t, r, typ, 50, 96)
		dm, _ := d.UploadMatrix(m, nil)
		params, _ := d.Alloc(16)
		buf := make([]byte, 16)
		binary.LittleEndian.PutUint64(buf, 30)
		binary.LittleEndian.PutUint64(buf[8:], 7)
		d.UploadBytes(params, buf)
		out := upF32(t, d, nanVec(96))
		if err := d.Embed(out, dm, params, 1, 3); err != nil { // row pos + 3 = 10
			t.Fatal(err)
		}
		got, want := down(t, d, out, 96), make([]float32, 96)
		m.RowF32(10, want)
		if !slices.Equal(got, want) {
			t.Fatalf("%s embedding row differs: %v, want %v", typ, got[:4], want[:4])
		}
		dm.Free(d)
		d.Free(params)
	}
}
