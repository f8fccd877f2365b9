package ops

import (
	"math"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/pinfer/pinfer/ops/avx2"
)

// The FFN over chosen neurons, for one token (decode) or many (prefill).
// With several tokens the neurons chosen for any of them (the union) are
// computed for all of them, tile by tile, so that each weight row is read
// from memory once per batch rather than once per token. A neuron computed
// for a token that did not choose it only makes that token's result closer
// to the dense one.

// ffnTile is the number of neurons whose rows stay in cache while every token
// of a batch uses them. One token reuses nothing, so it takes its whole
// share in one tile: the kernels then prefetch across the whole list.
const ffnTile = 64

// FFNBatch adds the FFN output of T tokens (rows of x) to out (T rows of
// down.Cols). actives[t] lists token t's neurons in ascending order; a nil
// actives, or a nil entry, means all neurons.
func FFNBatch(pool *Pool, f *FFN, down *Matrix, x []float32, T int, actives [][]int32, out []float32) {
	if Device != nil {
		// The device takes its hot neurons now and the CPU the cold ones
		// meanwhile; the partial sums meet in out.
		if cold, wait, ok := Device.FFNStart(f, down, x, T, actives); ok {
			defer wait(out)
			if cold == nil {
				return
			}
			actives = cold
		}
	}
	ffnCPU(pool, f, down, x, T, union(actives, T, f.Gate.Rows), actives, out)
}

// FFNRow is FFNBatch for one token.
func FFNRow(pool *Pool, f *FFN, down *Matrix, x []float32, active []int32, out []float32) {
	if Device != nil {
		var actives [][]int32
		if active != nil {
			actives = [][]int32{active}
		}
		FFNBatch(pool, f, down, x, 1, actives, out)
		return
	}
	ffnCPU(pool, f, down, x, 1, active, nil, out)
}

// ffnCPU computes neurons ids (nil: all) for the T tokens of x; actives,
// when given, are each token's own lists, whose union ids is.
func ffnCPU(pool *Pool, f *FFN, down *Matrix, x []float32, T int, ids []int32, actives [][]int32, out []float32) {
	predicted := ids != nil
	if ids == nil {
		ids = avx2.Iota(f.Gate.Rows)
	}
	if len(ids) == 0 {
		return
	}
	j := ffnJobs.Get().(*ffnJob)
	*j = ffnJob{f: f, down: down, x: x, T: T, ids: ids, predicted: predicted, parts: j.parts[:0], member: j.member[:0]}
	j.groupMembers(actives)
	j.fast = fastType(f.Gate.Type) && (f.Up == nil || f.Up.Type == f.Gate.Type) && fastType(down.Type)
	if j.fast {
		j.a = quantizeX(f.Gate.Type, x, f.Gate.Cols, T)
	}
	// Pieces of at least ffnPieceRows row-tokens: a small active set (the
	// cold share of a hybrid FFN) cut 4x per thread is all overhead: each
	// piece clears and leaves a partial sum of the whole output.
	th := pool.Threads()
	pool.Share(len(ids), max(th, min(pieces(th, T), T*len(ids)/ffnPieceRows)), j)
	// Each piece summed into its own partial; add them up now, in the
	// pieces' order, so that the result does not depend on timing, and
	// split by columns over the threads (eight threads leave 32 partials).
	slices.SortFunc(j.parts, func(a, b *ffnScratch) int { return a.lo - b.lo })
	j.sum = sumParts{parts: j.parts, out: out[:T*down.Cols]}
	pool.Do(T*down.Cols, &j.sum)
	for _, s := range j.parts {
		ffnBufs.Put(s)
	}
	releaseX(j.a)
	clear(j.parts)
	*j = ffnJob{parts: j.parts[:0]}
	ffnJobs.Put(j)
}

const ffnPieceRows = 32

// ffnJob is one FFN call as the workers see it; pooled, with its parts
// slice, so that a decode step allocates nothing here.
type ffnJob struct {
	f    *FFN
	down *Matrix
	x    []float32
	T    int
	ids  []int32
	fast bool
	// predicted: ids are a predictor's choice, not every neuron, so rows
	// whose output is zero may go unread (gatherUp, the down rows).
	predicted bool
	a         *avx2.Acts
	// member, for a prefill over predicted neurons with a gated activation:
	// per group of four tokens a bit per neuron, set when one of the four
	// chose it (empty otherwise).
	member []uint64
	mu     sync.Mutex
	parts  []*ffnScratch
	sum    sumParts
}

// sumParts adds an FFN's partial sums into out over a range of columns.
type sumParts struct {
	parts []*ffnScratch
	out   []float32
}

func (j *sumParts) Run(lo, hi int) {
	for _, s := range j.parts {
		Axpy(j.out[lo:hi], 1, s.acc[lo:hi])
	}
}

var ffnJobs = sync.Pool{New: func() any { return new(ffnJob) }}

func (j *ffnJob) Run(lo, hi int) {
	f, down, T := j.f, j.down, j.T
	s := ffnBufs.Get().(*ffnScratch)
	s.lo = lo
	s.acc = growF(s.acc, T*down.Cols)
	clear(s.acc)
	tile := hi - lo
	if T > 1 {
		tile = ffnTile
		s.act = growF(s.act, T*(hi-lo))
	}
	for t0 := lo; t0 < hi; t0 += tile {
		ids := j.ids[t0:min(hi, t0+tile)]
		k := len(ids)
		s.g, s.u = growF(s.g, T*k), growF(s.u, T*k)
		j.gatherGate(s, ids)
		decodeSkip := T == 1 && j.predicted && skipRows
		if f.Up != nil {
			if unread := j.gatherUp(s, ids); decodeSkip && f.Skipped != nil {
				atomic.AddInt64(&f.Skipped.Up, int64(unread))
			}
		}
		for t := 0; t < T; t++ {
			g, u := s.g[t*k:(t+1)*k], s.u[t*k:(t+1)*k]
			for i, id := range ids {
				gi, ui := g[i], float32(1)
				if f.GateBias != nil {
					gi += f.GateBias[id]
				}
				if f.Up != nil {
					ui = u[i]
				}
				g[i] = FFNActivation(f.Act, f.Threshold, gi, ui)
			}
		}
		if T > 1 {
			// A prefill's down projection waits for the piece's
			// activations (downEach).
			for t := 0; t < T; t++ {
				copy(s.act[t*(hi-lo)+t0-lo:], s.g[t*k:(t+1)*k])
			}
			continue
		}
		// One token's down projection, decode's, reads every row it is
		// given, so that dense decode stays the read of the whole file; a
		// predicted one leaves out the rows whose activation is zero.
		if decodeSkip {
			n := k
			ids, k = s.nonzero(ids)
			if f.Skipped != nil {
				atomic.AddInt64(&f.Skipped.Down, int64(n-k))
			}
		}
		axpyAny(j.fast, down, s.acc[:down.Cols], ids, s.g[:k])
	}
	if T > 1 {
		j.downEach(s, j.ids[lo:hi])
	}
	j.mu.Lock()
	j.parts = append(j.parts, s)
	j.mu.Unlock()
}

// downEach adds, token by token, the down rows of the piece's neurons ids
// whose activation (s.act) is not zero. Rows that are zero for every one
// of a group of tokens add exact zeros too, but a group reads the union of
// its tokens' rows: for eight tokens of a 7B prompt 2.6 times (sparse) to
// 3.9 times (dense) the rows that token by token reads, and the rows a
// token does read are in cache for the piece's next tokens.
func (j *ffnJob) downEach(s *ffnScratch, ids []int32) {
	n, cols := len(ids), j.down.Cols
	for t := 0; t < j.T; t++ {
		s.rows, s.tmp = s.rows[:0], s.tmp[:0]
		for i, a := range s.act[t*n : (t+1)*n] {
			if a != 0 {
				s.rows, s.tmp = append(s.rows, ids[i]), append(s.tmp, a)
			}
		}
		if len(s.rows) > 0 {
			axpyAny(j.fast, j.down, s.acc[t*cols:(t+1)*cols], s.rows, s.tmp)
		}
	}
}

// A prefill works in groups of four tokens, the q4_0 kernel's.
const prefillGroup = 4

// groupMembers sets j.member from the tokens' lists when a prefill over
// predicted neurons has a gated activation: each group of four tokens then
// computes the union of its own four lists, not the whole prompt's (which
// at 64 tokens holds most neurons). A neuron a token did not choose only
// brings its result closer to the dense one, as with the prompt's union.
func (j *ffnJob) groupMembers(actives [][]int32) {
	_, gated := gateCut(j.f.Act, j.f.Threshold)
	if j.T < 2 || actives == nil || !gated || !skipRows {
		return
	}
	words := j.memberWords()
	ng := (j.T + prefillGroup - 1) / prefillGroup
	if cap(j.member) < ng*words {
		j.member = make([]uint64, ng*words)
	}
	j.member = j.member[:ng*words]
	clear(j.member)
	for t, a := range actives[:j.T] {
		if a == nil {
			j.member = j.member[:0] // a token that wants every neuron
			return
		}
		m := j.member[t/prefillGroup*words:]
		for _, id := range a {
			m[id/64] |= 1 << (id % 64)
		}
	}
}

// memberWords is the length of one group's bit set in j.member.
func (j *ffnJob) memberWords() int { return (j.f.Gate.Rows + 63) / 64 }

// gatherGate sets s.g for neurons ids: for every token, or with j.member
// per group of four tokens for the group's neurons only, the others -inf
// (a gated activation gives them 0, and their up rows are not read).
func (j *ffnJob) gatherGate(s *ffnScratch, ids []int32) {
	if len(j.member) == 0 {
		gatherAll(j.fast, j.f.Gate, s.g, ids, j.x, j.T, j.a)
		return
	}
	words := j.memberWords()
	for t0 := 0; t0 < j.T; t0 += prefillGroup {
		m := j.member[t0/prefillGroup*words:]
		s.live, s.rows = s.live[:0], s.rows[:0]
		for i, id := range ids {
			if m[id/64]&(1<<(id%64)) != 0 {
				s.live, s.rows = append(s.live, i), append(s.rows, id)
			}
		}
		j.gatherLive(s, j.f.Gate, s.g, len(ids), t0, float32(math.Inf(-1)))
	}
}

// gatherUp sets s.u for neurons ids. Where the activation is zero whenever
// the gate does not fire (relu, fatrelu, drelu), each group of four tokens
// of a prefill, and a decode step over predicted neurons, reads only the up
// rows whose gate fired for one of them: the others' up values would be
// multiplied by zero (they are set to 0). Dense decode reads every row, so
// that it stays the read of the whole file. It returns how many of the
// groups' up rows it left unread.
func (j *ffnJob) gatherUp(s *ffnScratch, ids []int32) (unread int) {
	f, T, k := j.f, j.T, len(ids)
	cut, gated := gateCut(f.Act, f.Threshold)
	if !gated || !skipRows || (T < 2 && !j.predicted) {
		gatherAll(j.fast, f.Up, s.u, ids, j.x, T, j.a)
		return 0
	}
	for t0 := 0; t0 < T; t0 += prefillGroup {
		s.live, s.rows = s.live[:0], s.rows[:0]
		for i, id := range ids {
			for t := t0; t < min(T, t0+prefillGroup); t++ {
				g := s.g[t*k+i]
				if f.GateBias != nil {
					g += f.GateBias[id]
				}
				if g > cut {
					s.live, s.rows = append(s.live, i), append(s.rows, id)
					break
				}
			}
		}
		j.gatherLive(s, f.Up, s.u, k, t0, 0)
		unread += k - len(s.rows)
	}
	return unread
}

// gatherLive sets, for the group of tokens from t0, dst's entries (token
// rows of k) at the tile positions s.live to matrix m's rows s.rows times
// the tokens, and the group's other entries to fill.
func (j *ffnJob) gatherLive(s *ffnScratch, m *Matrix, dst []float32, k, t0 int, fill float32) {
	n := min(prefillGroup, j.T-t0)
	for t := t0; t < t0+n; t++ {
		row := dst[t*k : (t+1)*k]
		for i := range row {
			row[i] = fill
		}
	}
	r := len(s.rows)
	if r == 0 {
		return
	}
	s.tmp = growF(s.tmp, n*r)
	a := j.a
	if a != nil && n < j.T {
		s.sub = j.a.Tokens(t0, n)
		a = &s.sub
	}
	gatherAll(j.fast, m, s.tmp, s.rows, j.x[t0*m.Cols:(t0+n)*m.Cols], n, a)
	for t := range n {
		d := dst[(t0+t)*k:]
		for q, i := range s.live {
			d[i] = s.tmp[t*r+q]
		}
	}
}

// nonzero drops the neurons of a one-token tile whose activation (s.g) is
// zero: their down rows would add exact zeros. It returns the rest, with
// s.g compacted alike.
func (s *ffnScratch) nonzero(ids []int32) ([]int32, int) {
	s.rows = s.rows[:0]
	for i, id := range ids {
		if s.g[i] != 0 {
			s.g[len(s.rows)] = s.g[i]
			s.rows = append(s.rows, id)
		}
	}
	return s.rows, len(s.rows)
}

// skipRows lets the FFN leave unread the rows whose products are zero: a
// prefill's up rows and its groups' gate rows (gatherUp, groupMembers), a
// decode step's up and down rows; TestPrefillUpSkipExact clears it to
// compare.
var skipRows = true

// union merges sorted id lists; nil if any is nil (all neurons).
func union(actives [][]int32, T, n int) []int32 {
	if actives == nil {
		return nil
	}
	if T == 1 {
		return actives[0]
	}
	seen := make([]bool, n)
	for _, a := range actives[:T] {
		if a == nil {
			return nil
		}
		for _, i := range a {
			seen[i] = true
		}
	}
	var ids []int32
	for i, s := range seen {
		if s {
			ids = append(ids, int32(i))
		}
	}
	return ids
}

// ffnScratch is one worker's buffers.
type ffnScratch struct {
	lo             int // the piece it summed
	g, u, acc, tmp []float32
	act            []float32 // a prefill's activations, T rows of the piece
	live           []int     // gatherLive's positions in the tile
	rows           []int32   // and their neurons
	sub            avx2.Acts // its tokens' activations
}

var ffnBufs = sync.Pool{New: func() any { return new(ffnScratch) }}

func growF(b []float32, n int) []float32 {
	if cap(b) < n {
		return make([]float32, n)
	}
	return b[:n]
}

// gatherAll sets out[t*len(ids)+k] = row(ids[k]) · x_t for the T tokens, on
// the vector kernels when fast.
func gatherAll(fast bool, m *Matrix, out []float32, ids []int32, x []float32, T int, a *avx2.Acts) {
	k := len(ids)
	if fast {
		gatherT(m.Type, out, k, m.Data, m.Cols, ids, x, T, a)
		return
	}
	for t := 0; t < T; t++ {
		xt := x[t*m.Cols : (t+1)*m.Cols]
		for i, id := range ids {
			out[t*k+i] = m.DotRow(int(id), xt)
		}
	}
}

// axpyAny adds Σ coef[k]·row(ids[k]) to y.
func axpyAny(fast bool, m *Matrix, y []float32, ids []int32, coef []float32) {
	if fast {
		axpyRows(m.Type, y, m.Data, m.Cols, ids, coef)
		return
	}
	for k, i := range ids {
		if coef[k] != 0 {
			m.AxpyRow(int(i), coef[k], y)
		}
	}
}
