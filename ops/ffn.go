package ops

import (
	"math"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/pinfer/pinfer/ops/avx2"
)

// The FFN over chosen neurons, for one token (decode) or many (prefill).
// The neurons chosen for any of the tokens (the union) are shared out to
// the threads in pieces; within its piece, a prefill goes stage by stage
// (gates, ups, down) and, where a token's zeros allow, token by token over
// the rows that token needs, which the piece's earlier tokens have mostly
// brought into cache. The gates of a dense prefill are one mat-mat.

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
	j := ffnJobs.Get().(*ffnJob) // empty but for its buffers (reset)
	j.f, j.down, j.x, j.T, j.ids, j.predicted = f, down, x, T, ids, predicted
	j.ownGates(actives)
	j.fast = fastType(f.Gate.Type) && (f.Up == nil || f.Up.Type == f.Gate.Type) && fastType(down.Type)
	if j.fast {
		j.a = quantizeX(f.Gate.Type, x, f.Gate.Cols, T)
		if j.a != nil && !predicted && f.Gate.packed(false) != nil {
			j.a.PrepPacked()
		}
	}
	// A dense decode step whose down projection has its packed copy: the
	// pieces leave their activations in j.down8.coef, then the threads
	// share the columns of out, each adding every row's part
	// (avx2.AxpyQ4x16).
	if !predicted && T == 1 && j.fast {
		if a8 := down.packed(true); a8 != nil {
			j.down8 = downPacked{p: a8, coef: growF(j.down8.coef, len(ids)), out: out[:down.Cols]}
		}
	}
	// Pieces of at least ffnPieceRows row-tokens: a small active set (the
	// cold share of a hybrid FFN) cut 4x per thread is all overhead: each
	// piece clears and leaves a partial sum of the whole output.
	th := pool.Threads()
	pool.Share(len(ids), max(th, min(pieces(th, T), T*len(ids)/ffnPieceRows)), j)
	if j.down8.p != nil {
		pool.Do(avx2.Q4AxpyChunks(down.Cols), &j.down8)
	}
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
	j.reset()
	ffnJobs.Put(j)
}

// reset empties j for the pool, keeping its buffers.
func (j *ffnJob) reset() {
	clear(j.parts)
	*j = ffnJob{parts: j.parts[:0], pos: j.pos, down8: downPacked{coef: j.down8.coef}}
}

// downPacked adds Σ_r coef[r]·row r of a packed down projection p (all
// rows) to out, over a range of its chunks (avx2.Q4AxpyCols columns each).
type downPacked struct {
	p         []byte
	coef, out []float32
}

func (d *downPacked) Run(lo, hi int) {
	cb := len(d.p) / avx2.Q4AxpyChunks(len(d.out)) // a chunk's bytes over all rows
	avx2.AxpyQ4x16(d.out[avx2.Q4AxpyCols*lo:min(avx2.Q4AxpyCols*hi, len(d.out))], d.p[lo*cb:hi*cb], d.coef)
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
	// actives and pos (a neuron's place in ids), for a prefill over
	// predicted neurons with a gated activation: each token's gate over
	// its own neurons (ownGates).
	actives [][]int32
	pos     []int32
	mu      sync.Mutex
	parts   []*ffnScratch
	sum     sumParts
	// down8: a dense decode step's packed down projection (p nil when
	// there is none), to which the pieces leave every neuron's activation.
	down8 downPacked
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
	ids := j.ids[lo:hi]
	n := len(ids)
	s.g, s.u = growF(s.g, T*n), growF(s.u, T*n)
	if j.actives != nil {
		j.gateEach(s, lo, hi)
	} else {
		j.gatherRows(f.Gate, s.g, lo, hi)
	}
	decodeSkip := T == 1 && j.predicted && skipRows
	if f.Up != nil {
		if unread := j.gatherUp(s, lo, hi); decodeSkip && f.Skipped != nil {
			atomic.AddInt64(&f.Skipped.Up, int64(unread))
		}
	}
	for t := 0; t < T; t++ {
		var u []float32
		if f.Up != nil {
			u = s.u[t*n : (t+1)*n]
		}
		activate(f, s.g[t*n:(t+1)*n], u, ids)
	}
	if j.down8.p != nil {
		copy(j.down8.coef[lo:hi], s.g[:n])
		ffnBufs.Put(s)
		return
	}
	if T > 1 {
		j.downEach(s, ids)
	} else {
		// One token's down projection, decode's, reads every row it is
		// given, so that dense decode stays the read of the whole file;
		// a predicted one leaves out the rows whose activation is zero.
		if decodeSkip {
			ids = s.nonzero(ids, s.g[:n])
			if f.Skipped != nil {
				atomic.AddInt64(&f.Skipped.Down, int64(n-len(ids)))
			}
		}
		axpyAny(j.fast, down, s.acc[:down.Cols], ids, s.g[:len(ids)], false)
	}
	j.mu.Lock()
	j.parts = append(j.parts, s)
	j.mu.Unlock()
}

// activate sets g[i] to the activation of neuron ids[i] from its gate g[i]
// and up u[i] (nil: 1). The ReLU family is a compare per neuron, written
// out here: FFNActivation's per-call choice of activation cost about a
// millisecond per token of 7B dense decode.
func activate(f *FFN, g, u []float32, ids []int32) {
	cut, gated := gateCut(f.Act, f.Threshold)
	if !gated || f.GateBias != nil {
		for i, id := range ids {
			gi, ui := g[i], float32(1)
			if f.GateBias != nil {
				gi += f.GateBias[id]
			}
			if u != nil {
				ui = u[i]
			}
			g[i] = FFNActivation(f.Act, f.Threshold, gi, ui)
		}
		return
	}
	// Written so that the compiler selects instead of branching: whether a
	// neuron fires is a coin toss to the branch predictor. The tests are
	// FFNActivation's (g <= cut gives 0), so that a NaN passes through.
	switch {
	case u == nil:
		for i, gi := range g {
			v := float32(0)
			if !(gi <= cut) {
				v = gi
			}
			g[i] = v
		}
	case f.Act == "drelu":
		u = u[:len(g)]
		for i, gi := range g {
			v, ui := float32(0), u[i]
			if !(gi <= cut || ui <= 0) {
				v = gi * ui
			}
			g[i] = v
		}
	default:
		u = u[:len(g)]
		for i, gi := range g {
			v := float32(0)
			if !(gi <= cut) {
				v = gi * u[i]
			}
			g[i] = v
		}
	}
}

// gateEach sets s.g (T rows of the piece lo..hi of j.ids) to each token's
// gate over the neurons it chose, the others -inf. The union of four
// tokens' choices, which a four-token kernel would read, is twice a
// token's on the 7B file; the rows a token reads are in cache for the
// piece's next tokens.
func (j *ffnJob) gateEach(s *ffnScratch, lo, hi int) {
	n := hi - lo
	for i := range s.g[:j.T*n] {
		s.g[i] = float32(math.Inf(-1))
	}
	first, last := j.ids[lo], j.ids[hi-1]
	for t, a := range j.actives[:j.T] {
		s.rows, s.live = s.rows[:0], s.live[:0]
		i, _ := slices.BinarySearch(a, first)
		for ; i < len(a) && a[i] <= last; i++ {
			s.rows, s.live = append(s.rows, a[i]), append(s.live, int(j.pos[a[i]])-lo)
		}
		j.gatherToken(s, j.f.Gate, t, s.g[t*n:])
	}
}

// gatherToken sets dst[s.live[q]] to matrix m's row s.rows[q] times token t.
func (j *ffnJob) gatherToken(s *ffnScratch, m *Matrix, t int, dst []float32) {
	if len(s.rows) == 0 {
		return
	}
	s.tmp = growF(s.tmp, len(s.rows))
	a := j.a
	if a != nil && j.T > 1 {
		s.sub = j.a.Tokens(t, 1)
		a = &s.sub
	}
	gatherAll(j.fast, m, s.tmp, s.rows, j.x[t*m.Cols:(t+1)*m.Cols], 1, a)
	for q, p := range s.live {
		dst[p] = s.tmp[q]
	}
}

// downEach adds, token by token, the down rows of the piece's neurons ids
// whose activation (s.g) is not zero. Rows that are zero for every one
// of a group of tokens add exact zeros too, but a group reads the union of
// its tokens' rows: for eight tokens of a 7B prompt 2.6 times (sparse) to
// 3.9 times (dense) the rows that token by token reads, and the rows a
// token does read are in cache for the piece's next tokens. A dense
// prompt's tokens after the first take them as cached (int8 coefficients
// on AVX2): dense pp64 on the 7B file went from 20.6 to 21.3 t/s (medians
// of seven pairs of runs, faster in six); a sparse prompt's did not gain.
func (j *ffnJob) downEach(s *ffnScratch, ids []int32) {
	n, cols := len(ids), j.down.Cols
	for t := 0; t < j.T; t++ {
		g := s.g[t*n : (t+1)*n]
		if rows := s.nonzero(ids, g); len(rows) > 0 {
			axpyAny(j.fast, j.down, s.acc[t*cols:(t+1)*cols], rows, g[:len(rows)], t > 0 && !j.predicted)
		}
	}
}

// ownGates sets j.actives and j.pos when a prefill over predicted neurons
// has a gated activation: each token then computes the gates of its own
// neurons only (gateEach), the others' being -inf, which the activation
// turns into 0 and which leaves their up rows unread. The union of the
// prompt's lists, which at 64 tokens holds most neurons, is only the set
// that the pieces share out.
func (j *ffnJob) ownGates(actives [][]int32) {
	_, gated := gateCut(j.f.Act, j.f.Threshold)
	if j.T < 2 || actives == nil || !gated || !skipRows {
		return
	}
	for _, a := range actives[:j.T] {
		if a == nil {
			return // a token that wants every neuron
		}
	}
	j.actives = actives
	n := j.f.Gate.Rows
	if cap(j.pos) < n {
		j.pos = make([]int32, n)
	}
	j.pos = j.pos[:n]
	for p, id := range j.ids {
		j.pos[id] = int32(p)
	}
}

// gatherUp sets s.u for the piece's neurons j.ids[lo:hi]. Where the activation is
// zero whenever the gate does not fire (relu, fatrelu, drelu), each token
// of a prefill, and a decode step over predicted neurons, reads only the up
// rows whose gate fired for it: the others' up values would be multiplied
// by zero (they are set to 0). Dense decode reads every row, so that it
// stays the read of the whole file. It returns how many up rows it left
// unread.
func (j *ffnJob) gatherUp(s *ffnScratch, lo, hi int) (unread int) {
	f, T, ids, n := j.f, j.T, j.ids[lo:hi], hi-lo
	cut, gated := gateCut(f.Act, f.Threshold)
	if !gated || !skipRows || (T < 2 && !j.predicted) {
		j.gatherRows(f.Up, s.u, lo, hi)
		return 0
	}
	clear(s.u[:T*n])
	for t := 0; t < T; t++ {
		s.live, s.rows = s.live[:0], s.rows[:0]
		for i, id := range ids {
			g := s.g[t*n+i]
			if f.GateBias != nil {
				g += f.GateBias[id]
			}
			if g > cut {
				s.live, s.rows = append(s.live, i), append(s.rows, id)
			}
		}
		j.gatherToken(s, f.Up, t, s.u[t*n:])
		unread += n - len(s.rows)
	}
	return unread
}

// gatherRows is gatherAll over the piece lo..hi of j.ids into out: over
// m's packed copy where there is one and the piece is a run of rows (the
// ids of a dense FFN, all its neurons in order), the rest (its edges, or
// all) on the row kernels.
func (j *ffnJob) gatherRows(m *Matrix, out []float32, lo, hi int) {
	ids, n := j.ids[lo:hi], hi-lo
	if p8 := m.packed(false); p8 != nil && j.a != nil && !j.predicted {
		r0 := packedRows(m, p8, out, n, lo, lo, hi, j.a)
		if r0 < hi {
			gatherT(m.Type, out[r0-lo:], n, m.Data, m.Cols, ids[r0-lo:], j.x, j.T, j.a)
		}
		return
	}
	gatherAll(j.fast, m, out, ids, j.x, j.T, j.a)
}

// nonzero drops the neurons of one token whose activation (g, one per
// id) is zero: their down rows would add exact zeros. It returns the rest
// (in s.rows), with g compacted alike.
func (s *ffnScratch) nonzero(ids []int32, g []float32) []int32 {
	s.rows = s.rows[:0]
	for i, id := range ids {
		if g[i] != 0 {
			g[len(s.rows)] = g[i]
			s.rows = append(s.rows, id)
		}
	}
	return s.rows
}

// skipRows lets the FFN leave unread the rows whose products are zero: a
// prefill's up rows and the gate rows of neurons a token did not choose
// (gatherUp, ownGates), a decode step's up and down rows;
// TestPrefillUpSkipExact clears it to compare.
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
	live           []int     // gatherToken's positions in the piece
	rows           []int32   // and their neurons
	sub            avx2.Acts // its token's activations
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

// axpyAny adds Σ coef[k]·row(ids[k]) to y; cached says that the rows are
// mostly in cache (a prompt's token after its piece's first), where q4_0's
// int8 coefficients pay for scattered rows too (avx2.AxpyQ4_0Cached).
func axpyAny(fast bool, m *Matrix, y []float32, ids []int32, coef []float32, cached bool) {
	if fast {
		axpyRows(m.Type, y, m.Data, m.Cols, ids, coef, cached)
		return
	}
	for k, i := range ids {
		if coef[k] != 0 {
			m.AxpyRow(int(i), coef[k], y)
		}
	}
}
