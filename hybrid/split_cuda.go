//go:build cuda

package hybrid

import (
	"fmt"
	"slices"

	"github.com/pinfer/pinfer/graph"
	"github.com/pinfer/pinfer/ops"
	"github.com/pinfer/pinfer/ops/cuda"
	"github.com/pinfer/pinfer/predictors"
)

// The step under a VRAM budget. The GPU holds what the placement gives it:
// some mat-vecs' weights (attention, predictors, output) and of each sparse
// FFN its hot neurons. The device executor still runs the step, its graph
// cut where the host has work. After an FFN's predictor the host reads the
// chosen neurons and the FFN's input (the layer's one sync) and sends the
// hot ones back; a small graph runs them on the GPU while the CPU computes
// the cold ones, where their rows already are; the CPU's partial sum goes
// up and the next graph adds it in. A predictor left in CPU memory runs at
// that same host point. A mat-vec left there is a host point of its own:
// its input comes down, the CPU multiplies, the product goes up. Norms,
// rope, attention and the KV caches stay on the GPU whatever the budget,
// so a layer crosses PCIe only as vectors. The token's embedding row is
// read on the host: placements leave the table in CPU memory.

// split is what the executor keeps for a partial placement.
type split struct {
	dense map[*ops.Matrix]bool
	hot   map[*ops.Matrix]cuda.HotFFN // by gate
	emb   *hostEmbed
	mats  []*cuda.Matrix
	// active counts, per sparse layer, the neurons host predictors chose.
	active []int64
	hbufs  []*cuda.HostBuffer
}

// A cut ends one of the step's graphs before emit at; run works on the
// host before the next graph starts.
type cut struct {
	at  int
	run func(d *cuda.Device, pool *ops.Pool) error
}

type hostEmbed struct {
	m      *ops.Matrix
	offset int
	y      *cuda.Buffer
	h      *cuda.HostBuffer
}

func newSplit(r *cuda.Residency, layers int) *split {
	s := &split{dense: map[*ops.Matrix]bool{}, hot: map[*ops.Matrix]cuda.HotFFN{}, active: make([]int64, layers)}
	for _, m := range r.Dense {
		s.dense[m] = true
	}
	for _, f := range r.FFNs {
		s.hot[f.Gate] = f
	}
	return s
}

func (s *split) host(d *cuda.Device, bytes int64) (*cuda.HostBuffer, error) {
	h, err := d.AllocHost(max(bytes, 16))
	if err == nil {
		s.hbufs = append(s.hbufs, h)
	}
	return h, err
}

func (s *split) free(d *cuda.Device) {
	for _, m := range s.mats {
		m.Free(d)
	}
	for _, h := range s.hbufs {
		d.FreeHost(h)
	}
	s.mats, s.hbufs = nil, nil
}

// embed uploads the token's row before the step's first graph.
func (s *split) embed(d *cuda.Device, tok, pos int) error {
	em := s.emb
	row := em.h.F32()[:em.m.Cols]
	em.m.RowF32(tok+em.offset, row)
	return d.UploadHostAsync(em.y, em.h, 4*int64(em.m.Cols))
}

// hostEmbedding stands in for the token embedding's kernel.
func (e *DeviceExec) hostEmbedding(n *graph.Node, y *cuda.Buffer, yq *cuda.QX) error {
	if n.In[0] == -2 || e.split.emb != nil {
		return fmt.Errorf("a partial placement runs one token embedding and no position table")
	}
	m := n.W[0].M
	h, err := e.split.host(e.d, 4*int64(m.Cols))
	if err != nil {
		return err
	}
	off := n.A.Int("offset")
	e.embRow = m.Rows - off
	e.split.emb = &hostEmbed{m: m, offset: off, y: y, h: h}
	if yq != nil {
		e.emit(1, func(*devSession) error { return e.d.Quantize(yq, y) })
	}
	return nil
}

// hostMLP is the file's predictor on the host, for a layer whose fc1 and
// fc2 the placement left in CPU memory: the CPU path's own, so that it
// chooses as that path does.
type hostMLP struct {
	mlp    predictors.MLP
	ids    []int32
	active *int64 // neurons chosen, summed over steps (SparseCounts)
}

func (m *hostMLP) choose(pool *ops.Pool, l *predictors.Layer, r []float32) []int32 {
	m.ids = m.mlp.Predict(l, predictors.Input{Resid: r, Pool: pool}, m.ids[:0])
	*m.active += int64(len(m.ids))
	return m.ids
}

// hostMatVecs stands in for mat-vecs whose weights the placement left in
// CPU memory, all reading x: a host point brings x down, the CPU computes
// them (bias included) as the CPU path does, and their outputs, laid out
// one after another, go up into dst.
func (e *DeviceExec) hostMatVecs(nodes []*graph.Node, x, dst *cuda.Buffer) error {
	cols, rows := nodes[0].W[0].M.Cols, 0
	for _, n := range nodes {
		rows += n.W[0].M.Rows
	}
	hX, err := e.split.host(e.d, 4*int64(cols))
	if err != nil {
		return err
	}
	hY, err := e.split.host(e.d, 4*int64(rows))
	if err != nil {
		return err
	}
	e.cuts = append(e.cuts, cut{len(e.emits), func(d *cuda.Device, pool *ops.Pool) error {
		if err := d.DownloadHostAsync(hX, x, 4*int64(cols)); err != nil {
			return err
		}
		if err := d.Sync(); err != nil {
			return err
		}
		xs, y := hX.F32()[:cols], hY.F32()[:rows]
		for _, n := range nodes {
			m := n.W[0].M
			ops.MatMul(pool, y[:m.Rows], m, xs, 1)
			if b := n.W[1]; b != nil {
				ops.Axpy(y[:m.Rows], 1, b.Vec)
			}
			y = y[m.Rows:]
		}
		return d.UploadHostAsync(dst, hY, 4*int64(rows))
	}})
	return nil
}

// onHost tells whether the placement left m in CPU memory.
func (e *DeviceExec) onHost(m *ops.Matrix) bool {
	return e.split != nil && !e.split.dense[m]
}

// uploadRows puts rows of m (nil: all) on the device for the executor's life.
func (e *DeviceExec) uploadRows(m *ops.Matrix, rows []int32) (*cuda.Matrix, error) {
	if m == nil {
		return nil, nil
	}
	dm, err := e.d.UploadMatrix(m, rows)
	if err != nil {
		return nil, err
	}
	e.split.mats = append(e.split.mats, dm)
	e.bytes += int64(dm.Bytes())
	return dm, nil
}

// splitFFN queues a sparse FFN node's predictor, then cuts the step there
// for the host point that splits its neurons between the GPU and the CPU.
func (e *DeviceExec) splitFFN(n *graph.Node, y *cuda.Buffer, yq *cuda.QX, out []*cuda.Buffer, qx []*cuda.QX) error {
	d, l := e.d, n.Layers[0]
	var idx, count *cuda.Buffer
	var err error
	hostPred := e.onHost(l.FC1) || e.onHost(l.FC2)
	if !hostPred {
		if idx, count, err = e.predict(n, out, qx); err != nil {
			return err
		}
	}
	dbias, err := e.vec(n.W[6])
	if err != nil {
		return err
	}
	nff, cols := l.NFF, n.Cols
	x, xq := out[n.In[0]], qx[n.In[0]]
	cpu := ops.FFN{Gate: l.Gate, Up: l.Up, GateBias: l.GateBias, Act: l.Act, Threshold: l.Threshold}
	downCPU := n.W[2].M

	// The hot neurons: their rows, bias and a neuron -> device row table.
	hf := e.split.hot[l.Gate]
	local := make([]int32, nff)
	for i := range local {
		local[i] = -1
	}
	for k, id := range hf.Hot {
		local[id] = int32(k)
	}
	nHot := len(hf.Hot)
	var gate, up, down *cuda.Matrix
	var gbias, a, hidx, hcount *cuda.Buffer
	if nHot > 0 {
		if gate, err = e.uploadRows(l.Gate, hf.Hot); err != nil {
			return err
		}
		if l.Up != nil {
			if up, err = e.uploadRows(l.Up, hf.Hot); err != nil {
				return err
			}
		}
		if down, err = e.uploadRows(downCPU, hf.Hot); err != nil {
			return err
		}
		if l.GateBias != nil {
			b := make([]float32, nHot)
			for k, id := range hf.Hot {
				b[k] = l.GateBias[id]
			}
			if gbias, err = e.f32(b); err != nil {
				return err
			}
		}
		for _, p := range []**cuda.Buffer{&a, &hidx} {
			if *p, err = e.alloc(4 * int64(nHot)); err != nil {
				return err
			}
		}
		if hcount, err = e.alloc(4); err != nil {
			return err
		}
	}
	cold, err := e.alloc(4 * int64(cols))
	if err != nil {
		return err
	}
	// Pinned host buffers, one set per layer: a layer's uploads may still
	// be in flight while the next one's host point fills its own.
	type hostBuf struct {
		h     **cuda.HostBuffer
		bytes int
	}
	var hIdx, hCount, hX, hHot, hHotN, hCold *cuda.HostBuffer
	bufs := []hostBuf{{&hX, 4 * l.NEmbd}, {&hHot, 4 * max(nHot, 1)}, {&hHotN, 4}, {&hCold, 4 * cols}}
	if !hostPred { // the device predictor's choice comes down into these
		bufs = append(bufs, hostBuf{&hIdx, 4 * nff}, hostBuf{&hCount, 4})
	}
	for _, b := range bufs {
		if *b.h, err = e.split.host(d, int64(b.bytes)); err != nil {
			return err
		}
	}
	coldIDs := make([]int32, 0, nff)
	var cl []int32 // this token's cold neurons, from one host point to the next
	act, thr := l.Act, l.Threshold
	// A predictor in CPU memory reads its input (r, which may be x) on the
	// host and chooses as the CPU path's does.
	r, hR := out[n.In[1]], hX
	var mlp hostMLP
	if hostPred {
		if r != x {
			if hR, err = e.split.host(d, 4*int64(l.FC1.Cols)); err != nil {
				return err
			}
		}
		mlp = hostMLP{ids: make([]int32, 0, nff), active: &e.split.active[n.FirstLayer]}
	}

	// Host point 1: the predictor's choice and the FFN's input come to the
	// host; the hot share of the choice goes back.
	e.cuts = append(e.cuts, cut{len(e.emits), func(d *cuda.Device, pool *ops.Pool) error {
		if !hostPred {
			if err := d.DownloadHostAsync(hIdx, idx, 4*int64(nff)); err != nil {
				return err
			}
			if err := d.DownloadHostAsync(hCount, count, 4); err != nil {
				return err
			}
		}
		if err := d.DownloadHostAsync(hX, x, 4*int64(l.NEmbd)); err != nil {
			return err
		}
		if hR != hX {
			if err := d.DownloadHostAsync(hR, r, 4*int64(l.FC1.Cols)); err != nil {
				return err
			}
		}
		if err := d.Sync(); err != nil {
			return err
		}
		var chosen []int32
		if hostPred {
			chosen = mlp.choose(pool, l, hR.F32()[:l.FC1.Cols])
		} else {
			chosen = hIdx.I32()[:min(int(hCount.I32()[0]), nff)]
		}
		hot := hHot.I32()[:0]
		cl = coldIDs[:0]
		for _, id := range chosen {
			if r := local[id]; r >= 0 {
				hot = append(hot, r)
			} else {
				cl = append(cl, id)
			}
		}
		if nHot == 0 {
			return nil
		}
		hHotN.I32()[0] = int32(len(hot))
		if len(hot) > 0 {
			if err := d.UploadHostAsync(hidx, hHot, 4*int64(len(hot))); err != nil {
				return err
			}
		}
		return d.UploadHostAsync(hcount, hHotN, 4)
	}})
	// The hot neurons on the GPU, writing the FFN's output (and its bias)...
	if nHot > 0 {
		e.emit(2, func(*devSession) error {
			if err := d.GateUp(a, gate, up, x, xq, hidx, nHot, hcount, gbias, act, thr); err != nil {
				return err
			}
			return d.AxpyN(y, down, a, hidx, nHot, hcount, dbias, true)
		})
	}
	// ...while the CPU computes the cold ones (host point 2)...
	e.cuts = append(e.cuts, cut{len(e.emits), func(d *cuda.Device, pool *ops.Pool) error {
		c := hCold.F32()[:cols]
		clear(c)
		if len(cl) > 0 {
			slices.Sort(cl)
			ops.FFNRow(pool, &cpu, downCPU, hX.F32()[:l.NEmbd], cl, c)
		}
		dst := cold
		if nHot == 0 {
			dst = y // the whole output
		}
		return d.UploadHostAsync(dst, hCold, 4*int64(cols))
	}})
	// ...which the next graph adds in.
	switch {
	case nHot > 0:
		e.emit(1, func(*devSession) error { return d.Elementwise(y, yq, y, cold, cols, "add") })
	case dbias != nil:
		e.emit(1, func(*devSession) error { return d.Elementwise(y, yq, y, dbias, cols, "add") })
	case yq != nil:
		e.emit(1, func(*devSession) error { return d.Quantize(yq, y) })
	}
	return nil
}
