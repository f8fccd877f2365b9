package ops

import (
	"fmt"
	"math"
	"sync"
	"unsafe"

	"github.com/pinfer/pinfer/internal/hugepage"
	"github.com/pinfer/pinfer/ops/avx2"
)

// The built-in operators. Each is registered once with its shape rule; the
// graph package checks a model against these rules before anything runs.

func init() {
	Register(&Op{Name: "embedding", Doc: "rows of a table picked by the ids of input 0 (tokens or positions), minus offset",
		Inputs: 1, Weights: []Slot{{Name: "weight"}},
		Attrs: []AttrSpec{{Name: "offset", Kind: Int, Default: 0}},
		Shape: func(s *ShapeArgs) (int, error) {
			if s.In[0] != 1 {
				return 0, fmt.Errorf("input must be ids (tokens or positions), got a %d-wide input", s.In[0])
			}
			if s.W[0].M == nil {
				return 0, fmt.Errorf("weight %s must be 2-D", s.W[0].Name)
			}
			return s.W[0].M.Cols, nil
		},
		Run: func(c *Ctx) error {
			m, off := c.W[0].M, c.A.Int("offset")
			for t := 0; t < c.Out.Rows; t++ {
				id := int(c.In[0].Data[t]) + off
				if id < 0 || id >= m.Rows {
					return fmt.Errorf("id %d is outside the table %s of %d rows", id, c.W[0].Name, m.Rows)
				}
				m.RowF32(id, c.Out.Row(t))
			}
			return nil
		}})

	for _, mm := range []struct {
		name string
		last bool
		doc  string
	}{{"matmul", false, "x·Wᵀ (+ bias): a linear layer"}, {"output", true, "the output projection to logits; in decode only the last row is computed"}} {
		Register(&Op{Name: mm.name, Doc: mm.doc, Inputs: 1, LastRows: mm.last,
			Weights: []Slot{{Name: "weight", Whole: true}, {Name: "bias", Optional: true, Vector: true}},
			Shape: func(s *ShapeArgs) (int, error) {
				w := s.W[0]
				if w.M == nil {
					return 0, fmt.Errorf("weight %s must be 2-D", w.Name)
				}
				if w.M.Cols != s.In[0] {
					return 0, fmt.Errorf("weight %s has dims %v: rows of %d, but the input is %d wide", w.Name, w.Dims, w.M.Cols, s.In[0])
				}
				return w.M.Rows, vecFits(s.W[1], w.M.Rows)
			},
			Run: func(c *Ctx) error {
				x := c.In[0].Data
				if c.OutRows != nil {
					x = gatherRows(c.In[0], c.OutRows)
				}
				MatMul(c.Pool, c.Out.Data, c.W[0].M, x, c.Out.Rows)
				addBias(c)
				return nil
			},
			RunGroup: matmulGroup})
	}

	Register(&Op{Name: "rms_norm", Doc: "x / rms(x) · weight", Inputs: 1,
		Weights: []Slot{{Name: "weight", Vector: true}},
		Attrs:   []AttrSpec{{Name: "eps", Kind: Float, Default: 1e-5}},
		Shape: func(s *ShapeArgs) (int, error) {
			if err := epsFits(s.A); err != nil {
				return 0, err
			}
			return s.In[0], vecFits(s.W[0], s.In[0])
		},
		Run: func(c *Ctx) error {
			eps := float32(c.A.Float("eps"))
			// One row (decode) inline: the closure below, which the pool
			// keeps, would be an allocation per call.
			if c.Out.Rows == 1 {
				RMSNorm(c.Out.Row(0), c.In[0].Row(0), c.W[0].Vec, eps)
				return nil
			}
			c.Pool.Run(c.Out.Rows, func(lo, hi int) {
				for t := lo; t < hi; t++ {
					RMSNorm(c.Out.Row(t), c.In[0].Row(t), c.W[0].Vec, eps)
				}
			})
			return nil
		}})

	Register(&Op{Name: "layer_norm", Doc: "(x - mean) / std · weight + bias", Inputs: 1,
		Weights: []Slot{{Name: "weight", Vector: true}, {Name: "bias", Optional: true, Vector: true}},
		Attrs:   []AttrSpec{{Name: "eps", Kind: Float, Default: 1e-5}},
		Shape: func(s *ShapeArgs) (int, error) {
			if err := epsFits(s.A); err != nil {
				return 0, err
			}
			if err := vecFits(s.W[0], s.In[0]); err != nil {
				return 0, err
			}
			return s.In[0], vecFits(s.W[1], s.In[0])
		},
		Run: func(c *Ctx) error {
			eps := float32(c.A.Float("eps"))
			var b []float32
			if c.W[1] != nil {
				b = c.W[1].Vec
			}
			for t := 0; t < c.Out.Rows; t++ {
				LayerNorm(c.Out.Row(t), c.In[0].Row(t), c.W[0].Vec, b, eps)
			}
			return nil
		}})

	Register(&Op{Name: "rope", Doc: "rotary position embedding of each head (mode norm: pairs 2i,2i+1; neox: i,i+n_rot/2)",
		Inputs: 1,
		Attrs: []AttrSpec{{Name: "n_head", Kind: Int}, {Name: "n_rot", Kind: Int, Default: 0},
			{Name: "theta", Kind: Float, Default: 10000.0}, {Name: "mode", Kind: String, Default: "norm", Enum: []string{"norm", "neox"}}},
		Shape: func(s *ShapeArgs) (int, error) {
			nh, nrot := s.A.Int("n_head"), s.A.Int("n_rot")
			if nh <= 0 || s.In[0]%nh != 0 {
				return 0, fmt.Errorf("input width %d is not a multiple of n_head %d", s.In[0], nh)
			}
			if hd := s.In[0] / nh; nrot < 0 || nrot > hd || nrot%2 != 0 {
				return 0, fmt.Errorf("n_rot %d must be even and at most the head size %d", nrot, hd)
			}
			if th := s.A.Float("theta"); !(th > 0) || math.IsInf(th, 1) {
				return 0, fmt.Errorf("theta %v must be a positive number", th)
			}
			return s.In[0], nil
		},
		Run: func(c *Ctx) error {
			nh := c.A.Int("n_head")
			hd := c.In[0].Cols / nh
			nrot := c.A.Int("n_rot")
			if nrot == 0 {
				nrot = hd
			}
			neox, theta := c.A.Str("mode") == "neox", c.A.Float("theta")
			if c.Out.Rows == 1 {
				copy(c.Out.Data, c.In[0].Data[:len(c.Out.Data)])
				RoPE(c.Out.Row(0), nh, hd, nrot, c.Rows[0].Pos, theta, neox)
				return nil
			}
			c.Pool.Run(c.Out.Rows, func(lo, hi int) {
				for t := lo; t < hi; t++ {
					copy(c.Out.Row(t), c.In[0].Row(t))
					RoPE(c.Out.Row(t), nh, hd, nrot, c.Rows[t].Pos, theta, neox)
				}
			})
			return nil
		}})

	Register(&Op{Name: "attention", Doc: "causal multi-head attention of q over the cached k and v (GQA/MQA when n_head_kv < n_head; window > 0 limits how far back a token sees)",
		Inputs: 3,
		Attrs: []AttrSpec{{Name: "n_head", Kind: Int}, {Name: "n_head_kv", Kind: Int},
			{Name: "window", Kind: Int, Default: 0}, {Name: "scale", Kind: Float, Default: 0.0}},
		Shape:     attentionShape,
		Run:       attention,
		PosFloats: func(in []int, _ Attrs) int { return in[1] + in[2] },
		NewState: func(r Row, in []int, a Attrs) PosState {
			return newKVCache(r, a.Int("n_head_kv"), in[1], in[2])
		},
	})

	for name, f := range map[string]func([]float32){"relu": ReLU, "silu": SiLU, "gelu": GELU, "softmax": Softmax} {
		Register(&Op{Name: name, Doc: name + " of each row", Inputs: 1,
			Shape: func(s *ShapeArgs) (int, error) { return s.In[0], nil },
			Run: func(c *Ctx) error {
				copy(c.Out.Data, c.In[0].Data)
				for t := 0; t < c.Out.Rows; t++ {
					f(c.Out.Row(t))
				}
				return nil
			}})
	}

	// One loop per op rather than a function call per element: a decode
	// step's residual adds took 14 us each.
	for name, f := range map[string]func(out, a, b []float32){
		"add": func(out, a, b []float32) {
			if Fast {
				avx2.Add(out, a, b) // the residual adds, twice a layer
				return
			}
			a, b = a[:len(out)], b[:len(out)]
			for i := range out {
				out[i] = a[i] + b[i]
			}
		},
		"mul": func(out, a, b []float32) {
			a, b = a[:len(out)], b[:len(out)]
			for i := range out {
				out[i] = a[i] * b[i]
			}
		},
	} {
		Register(&Op{Name: name, Doc: "element-wise " + name + " of two equally wide inputs", Inputs: 2,
			Shape: sameWidth,
			Run: func(c *Ctx) error {
				if c.Out.Rows == 1 {
					f(c.Out.Data, c.In[0].Data, c.In[1].Data)
					return nil
				}
				w := c.Out.Cols
				c.Pool.Run(c.Out.Rows, func(lo, hi int) {
					f(c.Out.Data[lo*w:hi*w], c.In[0].Data[lo*w:], c.In[1].Data[lo*w:])
				})
				return nil
			}})
	}
}

func attentionShape(s *ShapeArgs) (int, error) {
	nh, nkv := s.A.Int("n_head"), s.A.Int("n_head_kv")
	if nh <= 0 || nkv <= 0 || nh%nkv != 0 {
		return 0, fmt.Errorf("n_head %d must be a positive multiple of n_head_kv %d", nh, nkv)
	}
	if s.In[0]%nh != 0 {
		return 0, fmt.Errorf("q width %d is not a multiple of n_head %d", s.In[0], nh)
	}
	hd := s.In[0] / nh
	if s.In[1] != nkv*hd {
		return 0, fmt.Errorf("k width %d, want n_head_kv·head_dim = %d·%d", s.In[1], nkv, hd)
	}
	if s.In[2]%nkv != 0 {
		return 0, fmt.Errorf("v width %d is not a multiple of n_head_kv %d", s.In[2], nkv)
	}
	return s.In[2] / nkv * nh, nil
}

// kvCache keeps every position's k and v rows of one attention node and
// one sequence: in k and v, or in f16 in k16 and v16. Head by head: kv
// head g's keys at position p start at (g·nctx+p)·hd, so that one head's
// cache is one run of rows. With a position's heads side by side instead,
// a head's rows lay 16 KB apart (a 7B's 32 heads of 128): a decode step at
// a long context read them from memory at 15.2 GB/s on one thread against
// 17.6 as one run (ops/avx2/NOTES.md).
type kvCache struct {
	k, v     []float32
	k16, v16 []uint16
	nctx     int
	nkv      int // kv heads
	hd, vd   int // a head's key and value widths
}

// newKVCache makes row r's cache: r.NCtx positions of kw keys and vw
// values, of r.KV. A cache of up to kvHugeMax bytes a side is made in 2 MB
// pages, faulted in now (hugepage.Slice); a longer one keeps 4 KB pages,
// taken as the context fills: faulting in a 7B's 4.3 GB for 4096 positions
// at once held up a run's start by 1.4-10 s.
func newKVCache(r Row, nkv, kw, vw int) *kvCache {
	if r.KV == F16 {
		return &kvCache{k16: kvSlice[uint16](r.NCtx * kw), v16: kvSlice[uint16](r.NCtx * vw), nctx: r.NCtx, nkv: nkv, hd: kw / nkv, vd: vw / nkv}
	}
	return &kvCache{k: kvSlice[float32](r.NCtx * kw), v: kvSlice[float32](r.NCtx * vw), nctx: r.NCtx, nkv: nkv, hd: kw / nkv, vd: vw / nkv}
}

// Planes is the keys and the values, each kv head's positions one run.
func (c *kvCache) Planes() []Plane {
	return []Plane{
		{F32: c.k, F16: c.k16, Runs: c.nkv, Width: c.hd, NCtx: c.nctx},
		{F32: c.v, F16: c.v16, Runs: c.nkv, Width: c.vd, NCtx: c.nctx},
	}
}

// kvHugeMax: a 7B's f32 cache of 512 positions (one side of one layer).
const kvHugeMax = 8 << 20

func kvSlice[T float32 | uint16](n int) []T {
	var z T
	if n*int(unsafe.Sizeof(z)) > kvHugeMax {
		return make([]T, n)
	}
	return hugepage.Slice[T](n)
}

// store puts position p's keys and values, nkv heads of each, in place.
func (c *kvCache) store(p, nkv int, k, v []float32) {
	hd, vd := len(k)/nkv, len(v)/nkv
	for g := range nkv {
		kat, vat := (g*c.nctx+p)*hd, (g*c.nctx+p)*vd
		kg, vg := k[g*hd:(g+1)*hd], v[g*vd:(g+1)*vd]
		if c.k16 != nil {
			EncodeF16(c.k16[kat:kat+hd], kg)
			EncodeF16(c.v16[vat:vat+vd], vg)
		} else {
			copy(c.k[kat:kat+hd], kg)
			copy(c.v[vat:vat+vd], vg)
		}
	}
}

// attnJob is one attention call's work over (row, head) pairs, recycled so
// that a decode step allocates nothing here.
type attnJob struct {
	c             *Ctx
	caches        []*kvCache
	hd, vd        int
	group, window int
	scale         float32
}

var attnJobs = sync.Pool{New: func() any { return new(attnJob) }}

// scoreBufs holds each worker's attention scores between calls.
var scoreBufs = sync.Pool{New: func() any { return new([]float32) }}

func attention(c *Ctx) error {
	q, k, v := c.In[0], c.In[1], c.In[2]
	nh, nkv := c.A.Int("n_head"), c.A.Int("n_head_kv")
	j := attnJobs.Get().(*attnJob)
	defer func() {
		// Keep no executor buffers or caches alive in the pool.
		clear(j.caches)
		j.c = nil
		attnJobs.Put(j)
	}()
	*j = attnJob{c: c, caches: j.caches[:0], hd: q.Cols / nh, vd: v.Cols / nkv, group: nh / nkv, window: c.A.Int("window")}
	// Store every row's k and v first: a prompt's rows attend to each other.
	for t, r := range c.Rows {
		if r.Pos >= r.NCtx {
			return fmt.Errorf("context is full: position %d, context %d", r.Pos, r.NCtx)
		}
		kv, _ := (*r.State).(*kvCache)
		if kv == nil {
			kv = newKVCache(r, nkv, k.Cols, v.Cols)
			*r.State = kv
		}
		kv.store(r.Pos, nkv, k.Row(t), v.Row(t))
		j.caches = append(j.caches, kv)
	}
	j.scale = float32(c.A.Float("scale"))
	if j.scale == 0 {
		j.scale = float32(1 / math.Sqrt(float64(j.hd)))
	}
	c.Pool.Do(nh*((q.Rows+attnBlock-1)/attnBlock), j)
	return nil
}

// attnBlock is how many of a prompt's rows one job takes per head: the
// four-vector kernels read each key and value once for them.
const attnBlock = 4

func (j *attnJob) Run(lo, hi int) {
	rows := len(j.c.Rows)
	nb := (rows + attnBlock - 1) / attnBlock
	buf := scoreBufs.Get().(*[]float32)
	defer scoreBufs.Put(buf)
	for job := lo; job < hi; job++ {
		// Head by head, each head's rows in turn: a prompt's rows then read
		// the same head's keys and values, which stay in cache, where row
		// by row every head's would pass through it for each row.
		h, t0 := job/nb, job%nb*attnBlock
		t1 := min(t0+attnBlock, rows)
		if t1-t0 == attnBlock && j.blockable(t0) {
			j.block(h, t0, buf)
			continue
		}
		for t := t0; t < t1; t++ {
			j.row(h, t, buf)
		}
	}
}

// span is the positions row t attends to: first..p.
func (j *attnJob) span(t int) (first, p int) {
	p = j.c.Rows[t].Pos
	if j.window > 0 && p-j.window+1 > 0 {
		first = p - j.window + 1
	}
	return first, p
}

// scratch returns *buf with room for n floats at least, grown to fit row
// t's whole context at once: growing by the one position each decode step
// adds was an allocation per step.
func (j *attnJob) scratch(buf *[]float32, n, t int) []float32 {
	if cap(*buf) < n {
		*buf = make([]float32, max(n, attnBlock*(j.c.Rows[t].NCtx+j.hd+j.vd)))
	}
	return (*buf)[:n]
}

// row is one row's attention over one head.
func (j *attnJob) row(h, t int, buf *[]float32) {
	c, hd, vd := j.c, j.hd, j.vd
	kv := j.caches[t]
	first, p := j.span(t)
	qh := c.In[0].Row(t)[h*hd : (h+1)*hd]
	kvh := h / j.group
	n := p + 1 - first
	all := j.scratch(buf, n+max(hd, vd), t)
	s, row := all[:n], all[n:]
	out := c.Out.Row(t)[h*vd : (h+1)*vd]
	kat, vat := (kvh*kv.nctx+first)*hd, (kvh*kv.nctx+first)*vd
	// The head's keys and values are matrices of n rows: the kernels
	// prefetch the positions ahead (one call per position left a 7B
	// decode at 512 positions waiting on memory).
	switch {
	case !Fast:
		for i := range s {
			s[i] = Dot(qh, cacheRow(row[:hd], kv.k, kv.k16, kat+i*hd))
		}
	case kv.k16 != nil:
		avx2.GatherF16Strided(s, kv.k16[kat:], hd, hd, qh)
	default:
		avx2.GatherF32Strided(s, kv.k[kat:], hd, hd, qh)
	}
	j.softmax(s)
	clear(out)
	switch {
	case !Fast:
		for i, w := range s {
			Axpy(out, w, cacheRow(row[:vd], kv.v, kv.v16, vat+i*vd))
		}
	case kv.v16 != nil:
		avx2.AxpyF16Strided(out, kv.v16[vat:], vd, s)
	default:
		avx2.AxpyF32Strided(out, kv.v[vat:], vd, s)
	}
}

func (j *attnJob) softmax(s []float32) {
	for i := range s {
		s[i] *= j.scale
	}
	Softmax(s)
}

// blockable reports whether rows t0.. of a block share one cache, as a
// prompt's rows do, so that block can take them together.
func (j *attnJob) blockable(t0 int) bool {
	kv := j.caches[t0]
	if !Fast {
		return false
	}
	for t := t0 + 1; t < t0+attnBlock; t++ {
		if j.caches[t] != kv {
			return false
		}
	}
	return true
}

// block is row for attnBlock rows of one sequence at once. They score the
// union of their spans; each row's softmax covers its own span, and its
// weights outside it are zero, so the values' sum is the row's own.
func (j *attnJob) block(h, t0 int, buf *[]float32) {
	c, hd, vd := j.c, j.hd, j.vd
	kv := j.caches[t0]
	lo, hi := j.span(t0)
	for t := t0 + 1; t < t0+attnBlock; t++ {
		f, p := j.span(t)
		lo, hi = min(lo, f), max(hi, p)
	}
	n := hi + 1 - lo
	all := j.scratch(buf, attnBlock*(n+hd+vd), t0)
	s, qs, ys := all[:attnBlock*n], all[attnBlock*n:][:attnBlock*hd], all[attnBlock*(n+hd):][:attnBlock*vd]
	for r := range attnBlock {
		copy(qs[r*hd:(r+1)*hd], c.In[0].Row(t0 + r)[h*hd:(h+1)*hd])
	}
	kvh := h / j.group
	kat, vat := (kvh*kv.nctx+lo)*hd, (kvh*kv.nctx+lo)*vd
	if kv.k16 != nil {
		avx2.GatherF16Strided4(s, kv.k16[kat:], hd, hd, qs)
	} else {
		avx2.GatherF32Strided4(s, kv.k[kat:], hd, hd, qs)
	}
	for r := range attnBlock {
		f, p := j.span(t0 + r)
		sr := s[r*n : (r+1)*n]
		j.softmax(sr[f-lo : p+1-lo])
		clear(sr[:f-lo])
		clear(sr[p+1-lo:])
	}
	clear(ys)
	if kv.v16 != nil {
		avx2.AxpyF16Strided4(ys, kv.v16[vat:], vd, s)
	} else {
		avx2.AxpyF32Strided4(ys, kv.v[vat:], vd, s)
	}
	for r := range attnBlock {
		copy(c.Out.Row(t0 + r)[h*vd:(h+1)*vd], ys[r*vd:(r+1)*vd])
	}
}

// gatherRows copies the chosen rows of t into one contiguous block.
func gatherRows(t *Tensor, rows []int) []float32 {
	out := make([]float32, 0, len(rows)*t.Cols)
	for _, r := range rows {
		out = append(out, t.Row(r)...)
	}
	return out
}

// cacheRow returns the len(buf) cached values at at: of f32, or of f16
// decoded into buf when the cache is f16 (f32 nil).
func cacheRow(buf, f32 []float32, f16 []uint16, at int) []float32 {
	if f32 != nil {
		return f32[at:][:len(buf)]
	}
	for i := range buf {
		buf[i] = F16ToF32(f16[at+i])
	}
	return buf
}

// matmulGroup runs matmul nodes that read the same input as one MatMulGroup.
func matmulGroup(cs []*Ctx) error {
	var mb [8]*Matrix
	var ob [8][]float32
	ms, outs := mb[:0], ob[:0]
	for _, c := range cs {
		ms, outs = append(ms, c.W[0].M), append(outs, c.Out.Data)
	}
	c0 := cs[0]
	MatMulGroup(c0.Pool, outs, ms, c0.In[0].Data, c0.Out.Rows)
	for _, c := range cs {
		addBias(c)
	}
	return nil
}

func addBias(c *Ctx) {
	if b := c.W[1]; b != nil {
		for t := 0; t < c.Out.Rows; t++ {
			Axpy(c.Out.Row(t), 1, b.Vec)
		}
	}
}

// epsFits checks a norm's eps: a negative one (a corrupt file's) would turn
// every row into NaN.
func epsFits(a Attrs) error {
	if eps := a.Float("eps"); !(eps >= 0) || math.IsInf(eps, 1) {
		return fmt.Errorf("eps %v must be a finite number, at least 0", eps)
	}
	return nil
}
