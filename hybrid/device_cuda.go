//go:build cuda

package hybrid

import (
	"encoding/binary"
	"fmt"
	"io"
	"runtime"
	"sync"
	"unsafe"
	"weak"

	"github.com/pinfer/pinfer/graph"
	"github.com/pinfer/pinfer/ops"
	"github.com/pinfer/pinfer/ops/cuda"
)

// The all-on-the-GPU executor. When the whole model fits, a decode step
// needs no CPU at all: every node's output lives in device memory, the KV
// caches too, and the step is captured once per session as a CUDA graph
// that each token replays. Only the token id and position go up (into a
// small device buffer the kernels read) and the logits come down.
//
// The step is the program's nodes in order, with three fusions: an add
// that feeds a norm runs inside the norm's kernel; matmuls that read the
// same input with the same weight format run as one mat-vec over their
// stacked rows (q, k and v); q4_0 weights read their input in q8_0, which
// the producing kernel writes alongside. The sparse FFN runs PowerInfer's
// predictor on the device (fc1, relu, fc2, compared to the cut, compacted
// into an index list whose length stays in device memory) or, for the
// dense and oracle predictors, every neuron.

// DeviceOptions say how the step is compiled.
type DeviceOptions struct {
	// Predictor is "mlp" (the file's fc1/fc2 on the device) or "dense"
	// (every neuron; the oracle predictor gives the same result).
	Predictor string
	Ordinal   int       // GPU
	Log       io.Writer // nil: silent
	// Resident, when set, is what the GPU may hold (a placement under a
	// VRAM budget): some mat-vecs' weights, and of each sparse FFN its hot
	// neurons; the rest runs on the CPU between the step's graphs
	// (split_cuda.go). Nil: the whole model.
	Resident *cuda.Residency
}

// DeviceExec runs a Program entirely on the GPU. Program returns the
// one-node program that stands in for the original: its sessions run here.
type DeviceExec struct {
	mu      sync.Mutex
	d       *cuda.Device
	src     *graph.Program
	prog    *graph.Program
	vocab   int
	embRow  int // rows of the token table: ids at or past it are refused
	posRows int // rows of a position table, when the model has one

	emits    []func(s *devSession) error
	launches int
	split    *split // nil: everything on the GPU
	cuts     []cut  // where the step's graph stops for the host
	attn     []attnSpec
	bufs     []*cuda.Buffer
	qxs      []*cuda.QX
	mats     map[*ops.Matrix]*cuda.Matrix
	vecs     map[*ops.Weight]*cuda.Buffer
	bytes    int64
	params   *cuda.Buffer // int64 token, position
	logits   *cuda.Buffer
	counts   *cuda.Buffer // int64 per sparse layer: neurons computed, summed over steps
	hParams  *cuda.HostBuffer
	hLogits  *cuda.HostBuffer
	sparse   bool // counts are kept on the device (mlp); else every neuron runs
	tokens   int64
	sessions []*sessRes
	closed   bool
}

type attnSpec struct{ kdim, vdim, nHead int }

// devSession is a session's Row.State: an ops.HeldState, whose KV caches
// a saved session reads in the source program's layout.
type devSession struct {
	e   *DeviceExec
	res *sessRes
}

// sessRes is what a session holds on the device; freed once the session is
// collected (graph.Session has no close), which a weak pointer tells.
type sessRes struct {
	owner  weak.Pointer[devSession]
	nctx   int
	kv     []*cuda.KVCache
	graphs []*cuda.Graph // the step, between its host points (one if none)
}

// NewDeviceExec uploads p's weights and compiles its decode step. An op or
// shape it cannot run on the device is an error naming the node; the
// caller then uses the hybrid path.
func NewDeviceExec(p *graph.Program, o DeviceOptions) (e *DeviceExec, err error) {
	if o.Predictor != "mlp" && o.Predictor != "dense" {
		return nil, fmt.Errorf("device executor: predictor %q runs on the CPU (the device runs mlp or dense)", o.Predictor)
	}
	if o.Resident != nil && o.Predictor != "mlp" {
		return nil, fmt.Errorf("device executor: a partial placement needs the mlp predictor, not %s", o.Predictor)
	}
	if err := supported(p, o.Predictor); err != nil {
		return nil, err
	}
	d, err := cuda.Open(o.Ordinal)
	if err != nil {
		return nil, err
	}
	d.Release() // driven through Bind from any goroutine, as the runner calls
	e = &DeviceExec{d: d, src: p, vocab: p.Vocab, mats: map[*ops.Matrix]*cuda.Matrix{}, vecs: map[*ops.Weight]*cuda.Buffer{}, sparse: o.Predictor == "mlp"}
	if o.Resident != nil {
		e.split = newSplit(o.Resident, len(p.Layers))
	}
	unbind, err := d.Bind()
	if err != nil {
		return nil, err
	}
	ex := e // a failing return sets e to nil before this runs
	defer func() {
		if err != nil {
			ex.free()
			unbind()
			e = nil
			return
		}
		unbind()
	}()
	if err = e.compile(o); err != nil {
		return nil, err
	}
	op := &ops.Op{Name: "device_step", Doc: "the whole decode step on the GPU, one CUDA graph per session", Inputs: 2, LastRows: true, Run: e.run}
	node := &graph.Node{Where: p.Nodes[p.Output].Where + " (all on the GPU)", ID: "device_step", Op: op, In: []int{-1, -2}, A: ops.Attrs{}, Cols: p.Vocab}
	e.prog = &graph.Program{Spec: p.Spec, Params: p.Params, Nodes: []*graph.Node{node}, Output: 0, Vocab: p.Vocab, Layers: p.Layers, StateOf: p}
	switch {
	case o.Log == nil:
	case e.split == nil:
		fmt.Fprintf(o.Log, "gpu: the whole step on %s: %.2f GiB of weights, %d kernels per token in one CUDA graph\n", d.Name, float64(e.bytes)/(1<<30), e.launches)
	default:
		fmt.Fprintf(o.Log, "gpu: the step on %s: %.2f GiB of weights, %d kernels per token in CUDA graphs, %d host points for the CPU's share\n", d.Name, float64(e.bytes)/(1<<30), e.launches, len(e.cuts))
	}
	return e, nil
}

// Program is the stand-in program whose sessions run on the device.
func (e *DeviceExec) Program() *graph.Program { return e.prog }

// Bytes is the device memory the weights take.
func (e *DeviceExec) Bytes() int64 { return e.bytes }

// Kernels is the number of kernels a decode step launches.
func (e *DeviceExec) Kernels() int { return e.launches }

// supported checks every node before anything is uploaded.
func supported(p *graph.Program, pred string) error {
	for _, n := range p.Nodes {
		bad := func(why string) error {
			return fmt.Errorf("%s: device executor: %s", n.Where, why)
		}
		for _, src := range n.In {
			if src < 0 && n.Op.Name != "embedding" {
				return bad("only an embedding may read tokens or positions")
			}
		}
		for _, w := range n.W {
			if w != nil && w.M != nil {
				if _, err := cuda.NewLayout(w.M.Type, w.M.Rows, w.M.Cols); err != nil {
					return bad(err.Error())
				}
			}
		}
		switch n.Op.Name {
		case "embedding", "rms_norm", "layer_norm", "matmul", "output", "rope", "attention", "add", "mul", "relu", "silu", "gelu":
		case "sparse_ffn":
			if len(n.Layers) != 1 {
				return bad("a sparse node of several FFNs")
			}
			l := n.Layers[0]
			if l.Up != nil && (l.Up.Type != l.Gate.Type || l.Up.Cols != l.Gate.Cols) {
				return bad("gate and up of different formats")
			}
			if pred == "mlp" && (l.FC1 == nil || l.FC2 == nil) {
				return bad("no fc1/fc2 for the mlp predictor")
			}
		default:
			return bad("op " + n.Op.Name + " has no device kernel")
		}
	}
	return nil
}

func (e *DeviceExec) alloc(bytes int64) (*cuda.Buffer, error) {
	b, err := e.d.Alloc(bytes)
	if err == nil {
		e.bufs = append(e.bufs, b)
	}
	return b, err
}

func (e *DeviceExec) allocQX(n int) (*cuda.QX, error) {
	q, err := e.d.AllocQX(n)
	if err == nil {
		e.qxs = append(e.qxs, q)
	}
	return q, err
}

func (e *DeviceExec) matrix(m *ops.Matrix) (*cuda.Matrix, error) {
	if dm := e.mats[m]; dm != nil {
		return dm, nil
	}
	if e.split != nil && !e.split.dense[m] {
		return nil, fmt.Errorf("a %dx%d matrix is not in the GPU placement", m.Rows, m.Cols)
	}
	dm, err := e.d.UploadMatrix(m, nil)
	if err != nil {
		return nil, err
	}
	e.mats[m] = dm
	e.bytes += int64(dm.Bytes())
	return dm, nil
}

func (e *DeviceExec) vec(w *ops.Weight) (*cuda.Buffer, error) {
	if w == nil {
		return nil, nil
	}
	if b := e.vecs[w]; b != nil {
		return b, nil
	}
	b, err := e.alloc(4 * int64(len(w.Vec)))
	if err != nil {
		return nil, err
	}
	if err := e.d.UploadF32(b, w.Vec); err != nil {
		return nil, err
	}
	e.vecs[w] = b
	e.bytes += 4 * int64(len(w.Vec))
	return b, nil
}

func (e *DeviceExec) f32(v []float32) (*cuda.Buffer, error) {
	if v == nil {
		return nil, nil
	}
	b, err := e.alloc(4 * int64(len(v)))
	if err != nil {
		return nil, err
	}
	return b, e.d.UploadF32(b, v)
}

func (e *DeviceExec) emit(launches int, f func(s *devSession) error) {
	e.emits = append(e.emits, f)
	e.launches += launches
}

// compile allocates every node's output and records the step's calls.
func (e *DeviceExec) compile(o DeviceOptions) error {
	p, d := e.src, e.d
	nodes := p.Nodes
	var err error
	if e.params, err = e.alloc(16); err != nil {
		return err
	}
	if e.hParams, err = d.AllocHost(16); err != nil {
		return err
	}
	if e.hLogits, err = d.AllocHost(4 * int64(p.Vocab)); err != nil {
		return err
	}
	if e.counts, err = e.alloc(8 * int64(max(len(p.Layers), 1))); err != nil {
		return err
	}
	if err = d.UploadBytes(e.counts, make([]byte, 8*max(len(p.Layers), 1))); err != nil {
		return err
	}

	// Which outputs a q4_0 weight reads (in q8_0), and who reads what.
	needQ := make([]bool, len(nodes))
	readers := make([][]int, len(nodes))
	maxCols := 0
	for i, n := range nodes {
		for _, src := range n.In {
			if src >= 0 {
				readers[src] = append(readers[src], i)
			}
		}
		for _, w := range n.W {
			if w != nil && w.M != nil {
				maxCols = max(maxCols, w.M.Cols)
			}
		}
		switch n.Op.Name {
		case "matmul", "output":
			needQ[n.In[0]] = needQ[n.In[0]] || n.W[0].M.Type == ops.Q4_0
		case "sparse_ffn":
			l := n.Layers[0]
			needQ[n.In[0]] = needQ[n.In[0]] || l.Gate.Type == ops.Q4_0
			if e.sparse {
				needQ[n.In[1]] = needQ[n.In[1]] || l.FC1.Type == ops.Q4_0
			}
		}
	}
	if err := d.Reserve(maxCols); err != nil {
		return err
	}

	// An add whose only readers are the norm right after it runs there.
	fusedAdd := make([]bool, len(nodes))
	for i, n := range nodes {
		if n.Op.Name == "add" && i+1 < len(nodes) && i != p.Output {
			nx := nodes[i+1]
			if (nx.Op.Name == "rms_norm" || nx.Op.Name == "layer_norm") && nx.In[0] == i {
				fusedAdd[i] = true
			}
		}
	}

	out := make([]*cuda.Buffer, len(nodes))
	qx := make([]*cuda.QX, len(nodes))
	for i := 0; i < len(nodes); i++ {
		n := nodes[i]
		if out[i] == nil {
			if group := e.stack(i); len(group) > 1 {
				if err := e.stacked(group, out, qx, needQ); err != nil {
					return err
				}
				i = group[len(group)-1]
				continue
			}
			if out[i], err = e.alloc(4 * int64(n.Cols)); err != nil {
				return err
			}
		}
		if needQ[i] && qx[i] == nil {
			if n.Cols%32 != 0 {
				return fmt.Errorf("%s: device executor: %d columns feed a q4_0 weight", n.Where, n.Cols)
			}
			if qx[i], err = e.allocQX(n.Cols); err != nil {
				return err
			}
		}
		if fusedAdd[i] {
			continue // the next node's norm computes it
		}
		if err := e.node(i, out, qx, fusedAdd); err != nil {
			return fmt.Errorf("%s: device executor: %v", n.Where, err)
		}
	}
	e.logits = out[p.Output]
	if e.embRow <= 0 {
		return fmt.Errorf("%s: device executor: no embedding reads the tokens", p.Nodes[0].Where)
	}
	return nil
}

// hostBytes views floats as their bytes.
func hostBytes(f []float32) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(&f[0])), 4*len(f))
}

// stack returns the run of matmul nodes from i on that read one input with
// the same format and width, have no bias, and whose row counts keep each
// output 16-byte aligned in the stacked one: they run as one mat-vec.
func (e *DeviceExec) stack(i int) []int {
	nodes := e.src.Nodes
	first := nodes[i]
	if first.Op.Name != "matmul" || first.W[1] != nil || i == e.src.Output {
		return nil
	}
	m0 := first.W[0].M
	group := []int{i}
	for j := i + 1; j < len(nodes); j++ {
		n := nodes[j]
		if n.Op.Name != "matmul" || n.W[1] != nil || n.In[0] != first.In[0] || j == e.src.Output {
			break
		}
		m := n.W[0].M
		if m.Type != m0.Type || m.Cols != m0.Cols {
			break
		}
		group = append(group, j)
	}
	for _, j := range group {
		if nodes[j].W[0].M.Rows%4 != 0 {
			return nil
		}
	}
	return group
}

// stacked uploads the group's matrices as one and queues its mat-vec;
// each node's output is its rows' part of the stacked output.
func (e *DeviceExec) stacked(group []int, out []*cuda.Buffer, qx []*cuda.QX, needQ []bool) error {
	nodes := e.src.Nodes
	m0 := nodes[group[0]].W[0].M
	rows, host := 0, false
	for _, j := range group {
		rows += nodes[j].W[0].M.Rows
		host = host || e.onHost(nodes[j].W[0].M)
	}
	all, err := e.alloc(4 * int64(rows))
	if err != nil {
		return err
	}
	off := int64(0)
	for _, j := range group {
		r := int64(nodes[j].W[0].M.Rows)
		out[j] = all.View(4*off, 4*r)
		off += r
		if needQ[j] {
			return fmt.Errorf("%s: device executor: a stacked mat-vec's output feeds a q4_0 weight", nodes[j].Where)
		}
	}
	src := nodes[group[0]].In[0]
	x, xq := out[src], qx[src]
	if host { // any of them left in CPU memory: all on the CPU, one host point
		ns := make([]*graph.Node, len(group))
		for k, j := range group {
			ns[k] = nodes[j]
		}
		return e.hostMatVecs(ns, x, all)
	}
	var data []byte
	for _, j := range group {
		data = append(data, nodes[j].W[0].M.Data...)
	}
	sm, err := ops.NewMatrix(m0.Type, rows, m0.Cols, data)
	if err != nil {
		return err
	}
	dm, err := e.d.UploadMatrix(sm, nil)
	if err != nil {
		return err
	}
	e.mats[sm] = dm
	e.bytes += int64(dm.Bytes())
	e.emit(1, func(*devSession) error { return e.d.Gemv(all, dm, x, xq, nil, rows, nil) })
	return nil
}

// node queues node i's kernels.
func (e *DeviceExec) node(i int, out []*cuda.Buffer, qx []*cuda.QX, fusedAdd []bool) error {
	d, n := e.d, e.src.Nodes[i]
	y, yq := out[i], qx[i]
	in := func(k int) *cuda.Buffer { return out[n.In[k]] }
	switch n.Op.Name {
	case "embedding":
		if e.split != nil {
			return e.hostEmbedding(n, y, yq)
		}
		m, err := e.matrix(n.W[0].M)
		if err != nil {
			return err
		}
		which := 0
		if n.In[0] == -2 {
			which = 1
			e.posRows = n.W[0].M.Rows - n.A.Int("offset")
		} else {
			e.embRow = n.W[0].M.Rows - n.A.Int("offset")
		}
		off := n.A.Int("offset")
		e.emit(1, func(*devSession) error { return d.Embed(y, m, e.params, which, off) })
		if yq != nil {
			e.emit(1, func(*devSession) error { return d.Quantize(yq, y) })
		}
	case "rms_norm", "layer_norm":
		w, err := e.vec(n.W[0])
		if err != nil {
			return err
		}
		var bias *cuda.Buffer
		if n.Op.Name == "layer_norm" && n.W[1] != nil {
			if bias, err = e.vec(n.W[1]); err != nil {
				return err
			}
		}
		x, b, sum := in(0), (*cuda.Buffer)(nil), (*cuda.Buffer)(nil)
		var sumq *cuda.QX
		if src := n.In[0]; fusedAdd[src] {
			an := e.src.Nodes[src]
			x, b, sum, sumq = out[an.In[0]], out[an.In[1]], out[src], qx[src]
		}
		eps, layer, cols := float32(n.A.Float("eps")), n.Op.Name == "layer_norm", n.Cols
		e.emit(1, func(*devSession) error { return d.Norm(y, yq, x, b, sum, sumq, w, bias, cols, eps, layer) })
	case "matmul", "output":
		if e.onHost(n.W[0].M) {
			if err := e.hostMatVecs([]*graph.Node{n}, in(0), y); err != nil {
				return err
			}
			if yq != nil {
				e.emit(1, func(*devSession) error { return d.Quantize(yq, y) })
			}
			return nil
		}
		m, err := e.matrix(n.W[0].M)
		if err != nil {
			return err
		}
		var bias *cuda.Buffer
		if n.W[1] != nil {
			if bias, err = e.vec(n.W[1]); err != nil {
				return err
			}
		}
		x, xq, rows := in(0), qx[n.In[0]], n.Cols
		e.emit(1, func(*devSession) error { return d.Gemv(y, m, x, xq, nil, rows, &cuda.GemvOpts{Bias: bias}) })
		if yq != nil {
			e.emit(1, func(*devSession) error { return d.Quantize(yq, y) })
		}
	case "rope":
		nh := n.A.Int("n_head")
		hd := n.Cols / nh
		nrot := n.A.Int("n_rot")
		if nrot == 0 {
			nrot = hd
		}
		theta, neox, x := n.A.Float("theta"), n.A.Str("mode") == "neox", in(0)
		e.emit(1, func(*devSession) error { return d.RoPEAt(y, x, nh, hd, nrot, e.params, theta, neox) })
		if yq != nil {
			e.emit(1, func(*devSession) error { return d.Quantize(yq, y) })
		}
	case "attention":
		k := len(e.attn)
		nh, nkv := n.A.Int("n_head"), n.A.Int("n_head_kv")
		e.attn = append(e.attn, attnSpec{kdim: e.src.Nodes[n.In[1]].Cols, vdim: e.src.Nodes[n.In[2]].Cols, nHead: nh})
		q, kk, v := in(0), in(1), in(2)
		window, scale := n.A.Int("window"), float32(n.A.Float("scale"))
		e.emit(1, func(s *devSession) error {
			return d.AttentionAt(y, q, kk, v, s.res.kv[k], e.params, nh, nkv, window, scale)
		})
		if yq != nil {
			e.emit(1, func(*devSession) error { return d.Quantize(yq, y) })
		}
	case "add", "mul", "relu", "silu", "gelu":
		a, b := in(0), (*cuda.Buffer)(nil)
		if len(n.In) > 1 {
			b = in(1)
		}
		op, cols := n.Op.Name, n.Cols
		e.emit(1, func(*devSession) error { return d.Elementwise(y, yq, a, b, cols, op) })
	case "sparse_ffn":
		if e.split != nil {
			return e.splitFFN(n, y, yq, out, qx)
		}
		return e.ffn(n, y, yq, out, qx)
	default:
		return fmt.Errorf("op %s has no device kernel", n.Op.Name)
	}
	return nil
}

// ffn queues a sparse FFN node: the predictor and the chosen neurons, or
// every neuron.
func (e *DeviceExec) ffn(n *graph.Node, y *cuda.Buffer, yq *cuda.QX, out []*cuda.Buffer, qx []*cuda.QX) error {
	d, l := e.d, n.Layers[0]
	gate, err := e.matrix(l.Gate)
	if err != nil {
		return err
	}
	var up *cuda.Matrix
	if l.Up != nil {
		if up, err = e.matrix(l.Up); err != nil {
			return err
		}
	}
	down, err := e.matrix(n.W[2].M)
	if err != nil {
		return err
	}
	gbias, err := e.f32(l.GateBias)
	if err != nil {
		return err
	}
	dbias, err := e.vec(n.W[6])
	if err != nil {
		return err
	}
	nff := l.NFF
	a, err := e.alloc(4 * int64(nff))
	if err != nil {
		return err
	}
	x, xq := out[n.In[0]], qx[n.In[0]]
	act, thr := l.Act, l.Threshold
	var idx, count *cuda.Buffer
	if e.sparse {
		if idx, count, err = e.predict(n, out, qx); err != nil {
			return err
		}
	}
	e.emit(2, func(*devSession) error {
		if err := d.GateUp(a, gate, up, x, xq, idx, nff, count, gbias, act, thr); err != nil {
			return err
		}
		return d.AxpyN(y, down, a, idx, nff, count, dbias, true)
	})
	if yq != nil {
		e.emit(1, func(*devSession) error { return d.Quantize(yq, y) })
	}
	return nil
}

// predict queues the FFN's predictor (fc1, relu, fc2 against the cut) and
// the compaction of its choice into an index list whose length stays on
// the device.
func (e *DeviceExec) predict(n *graph.Node, out []*cuda.Buffer, qx []*cuda.QX) (idx, count *cuda.Buffer, err error) {
	d, l, nff := e.d, n.Layers[0], n.Layers[0].NFF
	fc1, err := e.matrix(l.FC1)
	if err != nil {
		return nil, nil, err
	}
	fc2, err := e.matrix(l.FC2)
	if err != nil {
		return nil, nil, err
	}
	rank := l.FC1.Rows
	h, err := e.alloc(4 * int64(rank))
	if err != nil {
		return nil, nil, err
	}
	var hq *cuda.QX
	if l.FC2.Type == ops.Q4_0 {
		if hq, err = e.allocQX(rank); err != nil {
			return nil, nil, err
		}
	}
	mask, err := e.alloc(4 * int64(nff))
	if err != nil {
		return nil, nil, err
	}
	if idx, err = e.alloc(4 * int64(nff)); err != nil {
		return nil, nil, err
	}
	if count, err = e.alloc(4); err != nil {
		return nil, nil, err
	}
	total := e.counts.View(8*int64(n.FirstLayer), 8)
	r, rq, cut := out[n.In[1]], qx[n.In[1]], l.PredCut
	e.emit(1, func(*devSession) error { return d.Gemv(h, fc1, r, rq, nil, rank, &cuda.GemvOpts{Epi: cuda.EpiReLU}) })
	if hq != nil {
		e.emit(1, func(*devSession) error { return d.Quantize(hq, h) })
	}
	e.emit(2, func(*devSession) error {
		if err := d.Gemv(nil, fc2, h, hq, nil, nff, &cuda.GemvOpts{Epi: cuda.EpiCut, Cut: cut, Mask: mask}); err != nil {
			return err
		}
		return d.Compact(idx, count, total, mask, nff)
	})
	return idx, count, nil
}

// run is the stand-in node's op: each row is one replay of its session's
// step graph.
func (e *DeviceExec) run(c *ops.Ctx) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return fmt.Errorf("device executor: closed")
	}
	unbind, err := e.d.Bind()
	if err != nil {
		return err
	}
	defer unbind()
	want := map[int]int{} // row -> output row
	if c.OutRows != nil {
		for k, r := range c.OutRows {
			want[r] = k
		}
	}
	for t, r := range c.Rows {
		s, err := e.session(r)
		if err != nil {
			return err
		}
		if r.Pos >= s.res.nctx {
			return fmt.Errorf("context is full: position %d, context %d", r.Pos, s.res.nctx)
		}
		if e.posRows > 0 && r.Pos >= e.posRows {
			return fmt.Errorf("position %d is outside the position table of %d rows", r.Pos, e.posRows)
		}
		tok := int(c.In[0].Data[t])
		if tok < 0 || tok >= e.embRow {
			return fmt.Errorf("id %d is outside the token table of %d rows", tok, e.embRow)
		}
		var dst []float32
		if k, ok := want[t]; ok {
			dst = c.Out.Row(k)
		} else if c.OutRows == nil {
			dst = c.Out.Row(t)
		}
		if err := e.step(s, tok, r.Pos, dst, c.Pool); err != nil {
			return err
		}
	}
	return nil
}

func (e *DeviceExec) step(s *devSession, tok, pos int, dst []float32, pool *ops.Pool) error {
	h := e.hParams.F32()
	binary.LittleEndian.PutUint64(hostBytes(h[0:2]), uint64(tok))
	binary.LittleEndian.PutUint64(hostBytes(h[2:4]), uint64(pos))
	if err := e.d.UploadHostAsync(e.params, e.hParams, 16); err != nil {
		return err
	}
	if e.split != nil {
		if err := e.split.embed(e.d, tok, pos); err != nil {
			return err
		}
	}
	for i, g := range s.res.graphs {
		if g != nil {
			if err := g.Launch(); err != nil {
				return err
			}
		}
		if i < len(e.cuts) {
			if err := e.cuts[i].run(e.d, pool); err != nil {
				return err
			}
		}
	}
	e.tokens++
	if dst != nil {
		if err := e.d.DownloadHostAsync(e.hLogits, e.logits, 4*int64(e.vocab)); err != nil {
			return err
		}
	}
	// Also before the next step rewrites the pinned parameters.
	if err := e.d.Sync(); err != nil {
		return err
	}
	if dst != nil {
		copy(dst, e.hLogits.F32()[:e.vocab])
	}
	return nil
}

// session returns the row's device session, making it (KV caches and the
// captured step) on first use.
func (e *DeviceExec) session(r ops.Row) (*devSession, error) {
	if s, ok := (*r.State).(*devSession); ok {
		return s, nil
	}
	restored, _ := (*r.State).(*ops.Restored)
	e.sweep()
	res, err := e.newSession(r.NCtx)
	if err != nil {
		// Sessions no longer referenced may hold the memory: collect them.
		runtime.GC()
		e.sweep()
		if res, err = e.newSession(r.NCtx); err != nil {
			return nil, err
		}
	}
	s := &devSession{e: e, res: res}
	res.owner = weak.Make(s)
	e.sessions = append(e.sessions, res)
	if restored != nil {
		if err := s.upload(restored); err != nil {
			return nil, err
		}
	}
	*r.State = s
	return s, nil
}

// The caches' values, position-major on the device ([pos][kdim], as attn2
// stores them), cross to and from the host planes of the source program's
// attention nodes, which e.attn follows in order.

// upload copies a restored session's positions into the caches.
func (s *devSession) upload(r *ops.Restored) error {
	if len(r.Planes) != len(s.res.kv) {
		return fmt.Errorf("device executor: a restored state of %d caches, %d on the device", len(r.Planes), len(s.res.kv))
	}
	for k, kv := range s.res.kv {
		for j, dst := range []*cuda.Buffer{kv.K, kv.V} {
			pl := r.Planes[k][j]
			buf := make([]float32, r.N*pl.Runs*pl.Width)
			pl.PosMajor(buf, r.N)
			if err := s.e.d.UploadF32(dst, buf); err != nil {
				return err
			}
		}
	}
	return nil
}

// Download reads positions [0,n) of the caches into dst.
func (s *devSession) Download(dst [][]ops.Plane, n int) error {
	e := s.e
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return fmt.Errorf("device executor: closed")
	}
	if len(dst) != len(s.res.kv) {
		return fmt.Errorf("device executor: %d caches asked for, %d on the device", len(dst), len(s.res.kv))
	}
	unbind, err := e.d.Bind()
	if err != nil {
		return err
	}
	defer unbind()
	for k, kv := range s.res.kv {
		for j, src := range []*cuda.Buffer{kv.K, kv.V} {
			pl := dst[k][j]
			buf := make([]float32, n*pl.Runs*pl.Width)
			if err := e.d.DownloadF32(buf, src); err != nil {
				return err
			}
			pl.SetPosMajor(buf, n)
		}
	}
	return nil
}

func (e *DeviceExec) newSession(nctx int) (*sessRes, error) {
	res := &sessRes{nctx: nctx}
	for _, a := range e.attn {
		kv, err := e.d.NewKVCache(nctx, a.kdim, a.vdim, a.nHead)
		if err != nil {
			e.freeSession(res)
			return nil, err
		}
		res.kv = append(res.kv, kv)
	}
	s := &devSession{e: e, res: res}
	lo := 0
	ends := make([]int, 0, len(e.cuts)+1)
	for _, c := range e.cuts {
		ends = append(ends, c.at)
	}
	for _, hi := range append(ends, len(e.emits)) {
		g, err := e.capture(s, e.emits[lo:hi])
		if err != nil {
			e.freeSession(res)
			return nil, err
		}
		res.graphs = append(res.graphs, g)
		lo = hi
	}
	return res, nil
}

// capture records emits as one graph (nil for none).
func (e *DeviceExec) capture(s *devSession, emits []func(s *devSession) error) (*cuda.Graph, error) {
	if len(emits) == 0 {
		return nil, nil
	}
	if err := e.d.BeginCapture(); err != nil {
		return nil, err
	}
	for _, f := range emits {
		if err := f(s); err != nil {
			e.d.EndCapture() // ends the broken capture; its error is f's
			return nil, err
		}
	}
	return e.d.EndCapture()
}

func (e *DeviceExec) freeSession(res *sessRes) {
	for _, kv := range res.kv {
		kv.Free(e.d)
	}
	res.kv = nil
	for _, g := range res.graphs {
		if g != nil {
			g.Destroy()
		}
	}
	res.graphs = nil
}

// sweep frees the sessions whose graph.Session is gone.
func (e *DeviceExec) sweep() {
	live := e.sessions[:0]
	for _, res := range e.sessions {
		if res.owner.Value() == nil {
			e.freeSession(res)
			continue
		}
		live = append(live, res)
	}
	e.sessions = live
}

// SparseCounts returns, per sparse layer, the tokens stepped and the
// neurons computed since the executor was made (the predictor runs on the
// device, so the runner's stats do not see it).
func (e *DeviceExec) SparseCounts() (tokens int64, active []int64, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := len(e.src.Layers)
	active = make([]int64, n)
	if !e.sparse {
		for k, l := range e.src.Layers {
			active[k] = e.tokens * int64(l.NFF)
		}
		return e.tokens, active, nil
	}
	unbind, err := e.d.Bind()
	if err != nil {
		return 0, nil, err
	}
	defer unbind()
	buf := make([]float32, 2*max(n, 1))
	if err := e.d.DownloadF32(buf, e.counts); err != nil {
		return 0, nil, err
	}
	b := hostBytes(buf)
	for k := range active {
		active[k] = int64(binary.LittleEndian.Uint64(b[8*k:]))
		if e.split != nil {
			active[k] += e.split.active[k]
		}
	}
	return e.tokens, active, nil
}

// Close frees the device; the stand-in program must not run any more.
func (e *DeviceExec) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil
	}
	unbind, err := e.d.Bind()
	if err != nil {
		return err
	}
	defer unbind()
	e.free()
	return nil
}

func (e *DeviceExec) free() {
	e.closed = true
	e.d.Sync()
	for _, res := range e.sessions {
		e.freeSession(res)
	}
	e.sessions = nil
	for _, m := range e.mats {
		m.Free(e.d)
	}
	for _, b := range e.bufs {
		e.d.Free(b)
	}
	for _, q := range e.qxs {
		e.d.Free(q.Buf)
	}
	e.d.FreeHost(e.hParams)
	e.d.FreeHost(e.hLogits)
	if e.split != nil {
		e.split.free(e.d)
	}
	e.mats, e.bufs, e.qxs = nil, nil, nil
	e.d.Close() // releases the context; its thread unlock pairs with Bind's lock
	runtime.LockOSThread()
}
