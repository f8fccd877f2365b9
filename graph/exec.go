package graph

import (
	"fmt"

	"github.com/pinfer/pinfer/ops"
)

// Session runs a Program over one sequence, keeping each attention node's
// KV cache between calls: Forward a whole prompt (prefill), then one token
// at a time (decode).
type Session struct {
	p     *Program
	pool  *ops.Pool
	nctx  int
	pos   int
	state []any // per node: whatever the op keeps (the KV cache)
	plans map[planKey]*plan
	bufs  [][]float32
}

type planKey struct {
	rows int
	all  bool
}

// plan gives each node an output tensor in a shared buffer that no later
// reader of an earlier occupant still needs.
type plan struct {
	rows []int // output rows of each node
	buf  []int // buffer index of each node
	size []int // floats needed in each buffer
}

// NewSession starts an empty sequence of at most nctx positions.
func (p *Program) NewSession(nctx int, pool *ops.Pool) *Session {
	return &Session{p: p, pool: pool, nctx: nctx, state: make([]any, len(p.Nodes)), plans: map[planKey]*plan{}}
}

// Pos is the number of positions already in the cache.
func (s *Session) Pos() int { return s.pos }

// Reset empties the sequence; the caches are kept and overwritten.
func (s *Session) Reset() { s.pos = 0 }

// Forward runs tokens at the next positions and returns the logits: of every
// token when all is set, else of the last one only. The result is valid until
// the next call.
func (s *Session) Forward(tokens []int, all bool) (*ops.Tensor, error) {
	T := len(tokens)
	if T == 0 {
		return nil, fmt.Errorf("no tokens to run")
	}
	if s.pos+T > s.nctx {
		return nil, fmt.Errorf("context is full: %d positions used, %d more asked, context size %d", s.pos, T, s.nctx)
	}
	ids := &ops.Tensor{Rows: T, Cols: 1, Data: make([]float32, T)}
	pos := &ops.Tensor{Rows: T, Cols: 1, Data: make([]float32, T)}
	for i, t := range tokens {
		ids.Data[i] = float32(t)
		pos.Data[i] = float32(s.pos + i)
	}
	pl := s.planFor(T, all)
	outs := make([]*ops.Tensor, len(s.p.Nodes))
	for i, n := range s.p.Nodes {
		in := make([]*ops.Tensor, len(n.In))
		for k, src := range n.In {
			switch src {
			case srcTokens:
				in[k] = ids
			case srcPositions:
				in[k] = pos
			default:
				in[k] = outs[src]
			}
		}
		rows := pl.rows[i]
		outs[i] = &ops.Tensor{Rows: rows, Cols: n.Cols, Data: s.bufs[pl.buf[i]][:rows*n.Cols]}
		c := &ops.Ctx{In: in, Out: outs[i], W: n.W, A: n.A, Pos: s.pos, Pool: s.pool, State: &s.state[i], NCtx: s.nctx}
		if err := n.Op.Run(c); err != nil {
			return nil, fmt.Errorf("%s: %v", n.Where, err)
		}
	}
	s.pos += T
	out := outs[s.p.Output]
	if !all && out.Rows > 1 {
		out = &ops.Tensor{Rows: 1, Cols: out.Cols, Data: out.Row(out.Rows - 1)}
	}
	return out, nil
}

func (s *Session) planFor(T int, all bool) *plan {
	key := planKey{T, all}
	if pl, ok := s.plans[key]; ok {
		return pl
	}
	nodes := s.p.Nodes
	pl := &plan{rows: make([]int, len(nodes)), buf: make([]int, len(nodes))}
	lastUse := make([]int, len(nodes))
	for i, n := range nodes {
		lastUse[i] = i
		for _, src := range n.In {
			if src >= 0 {
				lastUse[src] = i
			}
		}
	}
	lastUse[s.p.Output] = len(nodes)
	var free []int
	for i, n := range nodes {
		pl.rows[i] = T
		if i == s.p.Output && !all && n.Op.LastRows {
			pl.rows[i] = 1
		}
		need := pl.rows[i] * n.Cols
		best := pickBuffer(free, pl.size, need)
		if best < 0 {
			pl.buf[i] = len(pl.size)
			pl.size = append(pl.size, need)
		} else {
			b := free[best]
			free = append(free[:best], free[best+1:]...)
			pl.buf[i] = b
			pl.size[b] = max(pl.size[b], need)
		}
		// Inputs whose last reader is this node free their buffers after it
		// runs, never before: an op may read and write different buffers only.
		for _, src := range uniq(n.In) {
			if src >= 0 && lastUse[src] == i {
				free = append(free, pl.buf[src])
			}
		}
		if lastUse[i] == i { // nobody reads it
			free = append(free, pl.buf[i])
		}
	}
	for b, sz := range pl.size {
		if b >= len(s.bufs) {
			s.bufs = append(s.bufs, nil)
		}
		if len(s.bufs[b]) < sz {
			s.bufs[b] = make([]float32, sz)
		}
	}
	s.plans[key] = pl
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
