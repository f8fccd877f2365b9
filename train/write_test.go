package train

import (
	"encoding/binary"
	"path/filepath"
	"testing"

	"github.com/pinfer/pinfer/convert"
	"github.com/pinfer/pinfer/gguf"
	"github.com/pinfer/pinfer/internal/fixtures"
	"github.com/pinfer/pinfer/ops"
	"github.com/stretchr/testify/require"
)

// A mixture's experts' predictors go into the file stacked, expert after
// expert, at the block's largest rank, the smaller ones padded with zeros;
// writing a file that already has them replaces them.
func TestWriteStacksExperts(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "m.gguf")
	require.NoError(t, convert.Convert(fixtures.Path(t, "arch", "mixtral-relu-moe"), src, convert.Options{Type: ops.F32}))
	f, err := gguf.Open(src)
	require.NoError(t, err)
	defer f.Close()
	const in, out, experts, blocks = 128, 256, 4, 2
	// Values that f16 holds exactly: they name their block, expert and place.
	val := func(b, e, i int) float32 { return float32(b*64+e*16+i%16) / 8 }
	var nets []*Net
	var at []Target
	for b := range blocks {
		for e := range experts {
			h := 4 + 2*e
			n := &Net{In: in, Hidden: h, Out: out, W1: make([]float32, h*in), W2: make([]float32, out*h)}
			for i := range n.W1 {
				n.W1[i] = val(b, e, i)
			}
			for i := range n.W2 {
				n.W2[i] = -val(b, e, i)
			}
			nets = append(nets, n)
			at = append(at, Target{Block: b, Expert: e, Experts: experts})
		}
	}
	dst := filepath.Join(dir, "p.gguf")
	require.NoError(t, Write(f, nets, at, dst, nil))
	again := filepath.Join(dir, "p2.gguf")
	g, err := gguf.Open(dst)
	require.NoError(t, err)
	defer g.Close()
	require.NoError(t, Write(g, nets, at, again, nil))
	w, err := gguf.Open(again)
	require.NoError(t, err)
	defer w.Close()
	require.Equal(t, "PWRI", w.Magic)

	const R = 4 + 2*(experts-1)
	f16 := func(b []byte, i int) float32 { return ops.F16ToF32(binary.LittleEndian.Uint16(b[2*i:])) }
	for b := range blocks {
		fc1, ok := w.Tensor(blk(b, "ffn_fc1_exps"))
		require.True(t, ok)
		require.Equal(t, []uint64{in, R, experts}, fc1.Dims)
		require.Equal(t, ops.F16, fc1.Type)
		fc2, ok := w.Tensor(blk(b, "ffn_fc2_exps"))
		require.True(t, ok)
		require.Equal(t, []uint64{R, out, experts}, fc2.Dims)
		d1, d2 := w.Data(fc1), w.Data(fc2)
		for e := range experts {
			h := 4 + 2*e
			for r := range R {
				for c := range in {
					want := float32(0)
					if r < h {
						want = val(b, e, r*in+c)
					}
					require.Equal(t, want, f16(d1, (e*R+r)*in+c), "block %d expert %d fc1[%d][%d]", b, e, r, c)
				}
			}
			for o := range out {
				for r := range R {
					want := float32(0)
					if r < h {
						want = -val(b, e, o*h+r)
					}
					require.Equal(t, want, f16(d2, (e*out+o)*R+r), "block %d expert %d fc2[%d][%d]", b, e, o, r)
				}
			}
		}
		_, plain := w.Tensor(blk(b, "fc1"))
		require.False(t, plain)
	}

	at[1].Expert = 0
	require.ErrorContains(t, Write(f, nets, at, dst, nil), "block 0: expert 0 of 4 is out of place or given twice")
	at[1].Expert = 1
	require.ErrorContains(t, Write(f, nets[1:], at[1:], dst, nil), "block 0: expert 0 has no predictor")
}
