package graph

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/pinfer/pinfer/ops"
	"github.com/pinfer/pinfer/predictors"
)

// Session is one sequence: its position and, per node, what the op keeps
// between calls (the KV cache). Forward runs a whole prompt (prefill) or one
// token at a time (decode); a Runner can run several sessions in one batch.
type Session struct {
	p       *Program
	nctx    int
	pos     int
	toks    []int // the tokens at positions 0..pos-1, for Reuse
	state   []any
	kv      ops.DType
	started bool    // a Forward ran: the caches exist
	runner  *Runner // for Forward on this session alone
}

// NewSession starts an empty sequence of at most nctx positions.
func (p *Program) NewSession(nctx int, pool *ops.Pool) *Session {
	return &Session{p: p, nctx: nctx, state: make([]any, len(p.Nodes)), runner: p.NewRunner(pool)}
}

// KVBytes is what a session of nctx positions keeps in its caches, its
// values of type kv (F32 or F16).
func (p *Program) KVBytes(nctx int, kv ops.DType) int64 {
	var per int64
	for _, n := range p.Nodes {
		per += int64(n.PosFloats)
	}
	return per * int64(kv.BlockBytes()) * int64(nctx)
}

// Pos is the number of positions already in the cache.
func (s *Session) Pos() int { return s.pos }

// NCtx is the session's context length.
func (s *Session) NCtx() int { return s.nctx }

// SetKVType sets the element type of the attention caches: F32 (the
// default) or F16, as llama.cpp keeps them: half the memory, and half the
// reads of a long context's decode. It must come before the first Forward.
func (s *Session) SetKVType(t ops.DType) error {
	if t != ops.F32 && t != ops.F16 {
		return fmt.Errorf("KV cache type %v: want f32 or f16", t)
	}
	if s.started {
		return fmt.Errorf("KV cache type: set it before the session's first Forward")
	}
	s.kv = t
	return nil
}

// Tokens is the tokens at positions 0..Pos()-1 (the session's own list:
// do not change it).
func (s *Session) Tokens() []int { return s.toks }

// ErrNoRoom is Shift's error when the positions to keep leave none to drop.
var ErrNoRoom = errors.New("context shift: the kept tokens fill the context")

// Shift makes room in the session, as llama.cpp's context shift: the
// first keep positions stay, half of the positions after them go, and the
// rest move down. It returns the tokens that must run again (from the
// first position whose history changed; at least one), after which the
// cache is what a session given the kept tokens from the start would hold.
func (s *Session) Shift(keep int) ([]int, error) {
	drop := (len(s.toks) - keep) / 2
	if keep < 0 || drop < 1 {
		return nil, fmt.Errorf("%w: keeping %d of %d positions", ErrNoRoom, keep, len(s.toks))
	}
	kept := append(append([]int(nil), s.toks[:keep]...), s.toks[keep+drop:]...)
	return kept[s.Reuse(kept):], nil
}

// Truncate keeps the first n positions and drops the rest, as a rejected
// draft's leave the cache.
func (s *Session) Truncate(n int) {
	n = max(0, min(n, s.pos))
	s.pos, s.toks = n, s.toks[:n]
}

// Reset empties the sequence; the caches are kept and overwritten.
func (s *Session) Reset() { s.pos, s.toks = 0, s.toks[:0] }

// Common is how many of prompt's first tokens the cache already holds,
// leaving at least the last one to run: its logits are not kept.
func (s *Session) Common(prompt []int) int {
	n := 0
	for n < len(s.toks) && n < len(prompt)-1 && s.toks[n] == prompt[n] {
		n++
	}
	return n
}

// Reuse keeps the cached positions that prompt begins with and drops the
// rest, as llama.cpp's server reuses a slot's cache for a prompt that
// repeats the last one's start (a chat's earlier turns). Every op's state
// is per position, so the kept ones are exactly what a Forward of that
// prefix would make. It returns how many prompt tokens need not run.
func (s *Session) Reuse(prompt []int) int {
	n := s.Common(prompt)
	s.Truncate(n)
	return n
}

// Forward runs tokens at the next positions and returns the logits: of every
// token when all is set, else of the last one only. The result is valid until
// the next call.
func (s *Session) Forward(tokens []int, all bool) (*ops.Tensor, error) {
	return s.runner.Forward([]*Session{s}, [][]int{tokens}, all)
}

// Runner owns the activation buffers, so it runs one batch at a time.
type Runner struct {
	p     *Program
	pool  *ops.Pool
	plans map[[3]int]*plan
	bufs  [][]float32

	// Predictor chooses each sparse FFN's neurons; nil computes them all.
	Predictor predictors.Predictor
	// Observe, if set, sees every sparse FFN row with the neurons chosen
	// (nil: all): profiling and predictor training hook in here.
	Observe func(l *predictors.Layer, in predictors.Input, active []int32)
	// Stats accumulates what the sparse FFNs did.
	Stats Stats
	// OpTimes, if set, accumulates each op's wall time over the Forward
	// calls (nil: no clock is read).
	OpTimes *OpTimes

	scratch [][][]int32 // per layer and row, reused by the predictor
	batched []int       // per layer: the Forward whose rows scratch holds, for a Batch predictor
	forward int         // Forwards begun
	predict []func(ffn, row int) []int32
	frame   frame
}

// countDense records that a sparse node ran all its neurons on rows rows.
// Experts of a mixture are counted for every row: they are not routed here.
func (r *Runner) countDense(n *Node, rows int) {
	for e, l := range n.Layers {
		r.Stats.Tokens[n.FirstLayer+e] += int64(rows)
		r.Stats.Active[n.FirstLayer+e] += int64(rows * l.NFF)
	}
}

// Stats counts, per sparse layer, the tokens seen and the neurons computed,
// and where the time went.
type Stats struct {
	Tokens  []int64 // per entry of Program.Layers
	Active  []int64
	Skipped []ops.Skipped // predicted neurons' rows a decode step did not read
	Predict time.Duration
	Total   time.Duration
}

// ActiveFraction is the share of layer k's neurons computed per token.
func (s *Stats) ActiveFraction(p *Program, k int) float64 {
	if k >= len(s.Tokens) || s.Tokens[k] == 0 {
		return 0
	}
	return float64(s.Active[k]) / float64(s.Tokens[k]) / float64(p.Layers[k].NFF)
}

// ReadFractions are the shares of layer k's gate, up and down rows read
// per token: ActiveFraction, less for up and down the rows a decode step
// skipped.
func (s *Stats) ReadFractions(p *Program, k int) (gate, up, down float64) {
	a := s.ActiveFraction(p, k)
	if a == 0 || k >= len(s.Skipped) {
		return a, a, a
	}
	per := float64(s.Tokens[k]) * float64(p.Layers[k].NFF)
	return a, a - float64(s.Skipped[k].Up)/per, a - float64(s.Skipped[k].Down)/per
}

// NewStats makes empty statistics for p's layers.
func NewStats(p *Program) Stats {
	n := len(p.Layers)
	return Stats{Tokens: make([]int64, n), Active: make([]int64, n), Skipped: make([]ops.Skipped, n)}
}

// NewRunner makes a runner for batches of p's sessions.
func (p *Program) NewRunner(pool *ops.Pool) *Runner {
	return &Runner{p: p, pool: pool, plans: map[[3]int]*plan{}, Stats: NewStats(p),
		scratch: make([][][]int32, len(p.Layers)), batched: make([]int, len(p.Layers))}
}

// SetPredictor chooses the session's predictor for Forward.
func (s *Session) SetPredictor(p predictors.Predictor) { s.runner.Predictor = p }

// Runner returns the runner Forward uses, for its stats and hooks.
func (s *Session) Runner() *Runner { return s.runner }

// predictFor returns the Ctx.Predict of sparse node i (made once): it asks
// the predictor, counts what was chosen and feeds the Observe hook.
func (r *Runner) predictFor(i int) func(ffn, row int) []int32 {
	if r.predict == nil {
		r.predict = make([]func(ffn, row int) []int32, len(r.p.Nodes))
	}
	if r.predict[i] != nil {
		return r.predict[i]
	}
	n := r.p.Nodes[i]
	r.predict[i] = func(ffn, row int) []int32 {
		in := r.frame.in[i]
		l, k := n.Layers[ffn], n.FirstLayer+ffn
		x := predictors.Input{Normed: in[0].Row(row), Resid: in[0].Row(row), Pool: r.pool}
		if len(in) > 1 {
			x.Resid = in[1].Row(row)
		}
		start := time.Now()
		var a []int32
		if r.Predictor != nil {
			// Each row keeps its own list: an op may ask for all rows first.
			for len(r.scratch[k]) <= row {
				r.scratch[k] = append(r.scratch[k], nil)
			}
			if b, ok := r.Predictor.(predictors.Batch); ok && in[0].Rows > 1 {
				// All rows on the first ask of this Forward, whatever the
				// op's order.
				if r.batched[k] != r.forward {
					rows := predictors.Rows{Resid: in[0].Data, Normed: in[0].Data, T: in[0].Rows, Pool: r.pool}
					if len(in) > 1 {
						rows.Resid = in[1].Data
					}
					r.scratch[k] = b.PredictRows(l, rows, r.scratch[k])
					r.batched[k] = r.forward
				}
				a = r.scratch[k][row]
			} else {
				a = r.Predictor.Predict(l, x, r.scratch[k][row][:0])
				r.scratch[k][row] = a
			}
		}
		r.Stats.Predict += time.Since(start)
		r.Stats.Tokens[k]++
		if a == nil {
			r.Stats.Active[k] += int64(l.NFF)
		} else {
			r.Stats.Active[k] += int64(len(a))
		}
		if r.Observe != nil {
			r.Observe(l, x, a)
		}
		return a
	}
	return r.predict[i]
}

// Forward runs each session's tokens as one batch: the rows of all sessions
// go through every matrix together. It returns the logits of every row when
// all is set, else of each session's last row, in session order.
func (r *Runner) Forward(seqs []*Session, tokens [][]int, all bool) (*ops.Tensor, error) {
	out, _, err := r.pass(seqs, tokens, all, -1)
	return out, err
}

// HiddenNode is the index in Nodes of the node the output reads: the
// hidden state as the output projection sees it (after the final norm in
// every built-in graph), which llama.cpp returns as a sequence's
// embeddings.
func (p *Program) HiddenNode() (int, error) {
	out := p.Nodes[p.Output]
	if len(out.In) == 0 || out.In[0] < 0 {
		return 0, fmt.Errorf("%s: the output reads no node, so there is no hidden state", out.Where)
	}
	return out.In[0], nil
}

// Hidden runs tokens at the next positions, as Forward does, and returns
// the rows of the node the output reads (Program.HiddenNode): one per
// token, every position's. The result is valid until the next call.
func (s *Session) Hidden(tokens []int) (*ops.Tensor, error) {
	return s.runner.Hidden([]*Session{s}, [][]int{tokens})
}

// Hidden runs each session's tokens as one batch, as Forward does, and
// returns the rows of the node the output reads (Program.HiddenNode) for
// every token, in session order; the output itself computes only the last
// rows, where its op can skip the others.
func (r *Runner) Hidden(seqs []*Session, tokens [][]int) (*ops.Tensor, error) {
	h, err := r.p.HiddenNode()
	if err != nil {
		return nil, err
	}
	_, hid, err := r.pass(seqs, tokens, false, h)
	return hid, err
}

// pass is Forward that also returns node keep's rows (keep >= 0): its
// buffer is kept to the end of the pass.
func (r *Runner) pass(seqs []*Session, tokens [][]int, all bool, keep int) (*ops.Tensor, *ops.Tensor, error) {
	start := time.Now()
	defer func() { r.Stats.Total += time.Since(start) }()
	r.forward++
	f := &r.frame
	f.reset(len(r.p.Nodes))
	for k, s := range seqs {
		if s.p != r.p {
			return nil, nil, fmt.Errorf("session %d belongs to another model", k)
		}
		T := len(tokens[k])
		if T == 0 {
			return nil, nil, fmt.Errorf("session %d: no tokens to run", k)
		}
		if s.pos+T > s.nctx {
			return nil, nil, fmt.Errorf("context is full: %d positions used, %d more asked, context size %d", s.pos, T, s.nctx)
		}
		for i, t := range tokens[k] {
			f.rows = append(f.rows, ops.Row{Pos: s.pos + i, NCtx: s.nctx, KV: s.kv})
			f.seq = append(f.seq, s)
			f.ids.Data = append(f.ids.Data, float32(t))
			f.pos.Data = append(f.pos.Data, float32(s.pos+i))
			if all || i == T-1 {
				f.outRows = append(f.outRows, len(f.rows)-1)
			}
		}
	}
	N := len(f.rows)
	f.ids.Rows, f.pos.Rows = N, N
	outRows := f.outRows
	if len(outRows) == N {
		outRows = nil // every row: no gather needed
	}
	pl := r.planFor(N, len(outRows), keep)
	for i := 0; i < len(r.p.Nodes); {
		k := pl.group[i]
		for j := i; j < i+k; j++ {
			r.bind(j, pl, outRows)
		}
		if err := r.timed(i, k); err != nil {
			return nil, nil, fmt.Errorf("%s: %v", r.p.Nodes[i].Where, err)
		}
		i += k
	}
	for k, s := range seqs {
		s.pos += len(tokens[k])
		if s.toks == nil {
			// Room for the whole context at once: decode appends a token
			// a step without growing it.
			s.toks = make([]int, 0, s.nctx)
		}
		s.toks = append(s.toks, tokens[k]...)
		s.started = true
	}
	out := &f.out[r.p.Output]
	if outRows != nil && !pl.trimmed[r.p.Output] {
		// The output op cannot skip rows: pick the wanted ones afterwards.
		picked := &ops.Tensor{Rows: len(outRows), Cols: out.Cols}
		for _, row := range outRows {
			picked.Data = append(picked.Data, out.Row(row)...)
		}
		out = picked
	}
	var kept *ops.Tensor
	if keep >= 0 {
		kept = &f.out[keep]
	}
	return out, kept, nil
}

// bind sets up node i's inputs, output and Ctx for this Forward.
func (r *Runner) bind(i int, pl *plan, outRows []int) {
	f, n, N := &r.frame, r.p.Nodes[i], len(r.frame.rows)
	in := f.in[i][:0]
	for _, src := range n.In {
		switch src {
		case srcTokens:
			in = append(in, &f.ids)
		case srcPositions:
			in = append(in, &f.pos)
		default:
			in = append(in, &f.out[src])
		}
	}
	f.in[i] = in
	// Each row's state slot is its own session's.
	for j, s := range f.seq {
		f.rows[j].State = &s.state[i]
	}
	nrows := N
	c := &f.ctx[i]
	*c = ops.Ctx{In: in, W: n.W, A: n.A, Rows: f.rows, Pool: r.pool}
	if pl.trimmed[i] {
		c.OutRows, nrows = outRows, len(outRows)
	}
	f.out[i] = ops.Tensor{Rows: nrows, Cols: n.Cols, Data: r.bufs[pl.buf[i]][:nrows*n.Cols]}
	c.Out = &f.out[i]
	if n.Op.Sparse && (r.Predictor != nil || r.Observe != nil) {
		c.Predict = r.predictFor(i)
		if len(n.Layers) == 1 && n.FirstLayer < len(r.Stats.Skipped) {
			c.Skipped = &r.Stats.Skipped[n.FirstLayer]
		}
	} else if n.Op.Sparse {
		r.countDense(n, in[0].Rows)
	}
}

// timed is run, its time given to OpTimes when that is set (a sparse
// op's predictor's apart, as PredictorOp).
func (r *Runner) timed(i, k int) error {
	if r.OpTimes == nil {
		return r.run(i, k)
	}
	start, predicted := time.Now(), r.Stats.Predict
	err := r.run(i, k)
	d, pred := time.Since(start), r.Stats.Predict-predicted
	r.OpTimes.Add(OpTime{Op: r.p.Nodes[i].Op.Name, Calls: 1, Time: d - pred})
	if pred > 0 {
		r.OpTimes.Add(OpTime{Op: PredictorOp, Calls: 1, Time: pred})
	}
	return err
}

// run runs nodes i..i+k-1, bound: one node by its op's Run, a group (k > 1)
// by its RunGroup.
func (r *Runner) run(i, k int) error {
	f, op := &r.frame, r.p.Nodes[i].Op
	if k == 1 {
		return op.Run(&f.ctx[i])
	}
	f.group = f.group[:0]
	for j := i; j < i+k; j++ {
		f.group = append(f.group, &f.ctx[j])
	}
	return op.RunGroup(f.group)
}

// frame is one Forward's bookkeeping, kept between calls so that a decode
// step allocates nothing once the shapes have been seen.
type frame struct {
	rows     []ops.Row
	seq      []*Session
	ids, pos ops.Tensor // the graph's sources, [N,1]
	outRows  []int
	out      []ops.Tensor    // per node
	in       [][]*ops.Tensor // per node
	ctx      []ops.Ctx       // per node
	group    []*ops.Ctx      // the nodes of a RunGroup call
}

func (f *frame) reset(nodes int) {
	f.rows, f.seq, f.outRows = f.rows[:0], f.seq[:0], f.outRows[:0]
	f.ids = ops.Tensor{Cols: 1, Data: f.ids.Data[:0]}
	f.pos = ops.Tensor{Cols: 1, Data: f.pos.Data[:0]}
	if len(f.out) != nodes {
		f.out, f.in, f.ctx = make([]ops.Tensor, nodes), make([][]*ops.Tensor, nodes), make([]ops.Ctx, nodes)
	}
}

// plan gives each node an output buffer shared with nodes whose results are
// no longer needed by the time it runs.
type plan struct {
	trimmed []bool // the node computes only the wanted output rows
	buf     []int  // buffer index of each node
	group   []int  // nodes run as one call from here on (0 inside a group)
}

func (r *Runner) planFor(rows, outRows, keep int) *plan {
	key := [3]int{rows, outRows, keep}
	if pl, ok := r.plans[key]; ok {
		return pl
	}
	nodes := r.p.Nodes
	pl := &plan{trimmed: make([]bool, len(nodes)), buf: make([]int, len(nodes)), group: make([]int, len(nodes))}
	lastUse := make([]int, len(nodes))
	for i, n := range nodes {
		lastUse[i] = i
		for _, src := range n.In {
			if src >= 0 {
				lastUse[src] = i
			}
		}
		pl.trimmed[i] = i == r.p.Output && outRows > 0 && n.Op.LastRows
	}
	lastUse[r.p.Output] = len(nodes)
	if keep >= 0 {
		lastUse[keep] = len(nodes) // read after the pass (Hidden)
	}
	// Nodes of one op that can run as a group (Op.RunGroup), one after
	// another with the same inputs, run as one call: a layer's q, k and v
	// mat-vecs become one pass of the pool over their rows.
	for i := 0; i < len(nodes); {
		k := 1
		for i+k < len(nodes) && groupable(nodes[i+k-1], nodes[i+k]) && !pl.trimmed[i+k-1] && !pl.trimmed[i+k] {
			k++
		}
		pl.group[i] = k
		i += k
	}
	var size []int
	var free []int
	first := 0 // of i's group
	for i, n := range nodes {
		if pl.group[i] > 0 {
			first = i
		}
		need := rows * n.Cols
		if pl.trimmed[i] {
			need = outRows * n.Cols
		}
		if best := pickBuffer(free, size, need); best < 0 {
			pl.buf[i] = len(size)
			size = append(size, need)
		} else {
			b := free[best]
			free = append(free[:best], free[best+1:]...)
			pl.buf[i] = b
			size[b] = max(size[b], need)
		}
		// An input's buffer is free once its last reader has run; an op never
		// writes into its own input.
		for _, src := range uniq(n.In) {
			if src >= 0 && lastUse[src] == i {
				free = append(free, pl.buf[src])
			}
		}
		// Outputs nobody reads are free once their group has run: its
		// nodes write at the same time.
		if i == first+pl.group[first]-1 {
			for j := i; j >= first; j-- {
				if lastUse[j] == j {
					free = append(free, pl.buf[j])
				}
			}
		}
	}
	for b, sz := range size {
		if b >= len(r.bufs) {
			r.bufs = append(r.bufs, nil)
		}
		if len(r.bufs[b]) < sz {
			r.bufs[b] = make([]float32, sz)
		}
	}
	r.plans[key] = pl
	return pl
}

// pickBuffer returns the index in free of the smallest buffer that holds
// need floats, else of the largest (which will grow), else -1.
func pickBuffer(free, size []int, need int) int {
	best := -1
	for k, b := range free {
		switch {
		case best < 0:
			best = k
		case size[b] >= need && (size[free[best]] < need || size[b] < size[free[best]]):
			best = k
		case size[free[best]] < need && size[b] > size[free[best]]:
			best = k
		}
	}
	return best
}

// groupable reports whether b can run in one call with a, the node before it.
func groupable(a, b *Node) bool {
	return a.Op == b.Op && a.Op.RunGroup != nil && slices.Equal(a.In, b.In)
}

func uniq(in []int) []int {
	var out []int
	for _, v := range in {
		dup := false
		for _, o := range out {
			dup = dup || o == v
		}
		if !dup {
			out = append(out, v)
		}
	}
	return out
}
