package graph

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"math"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/pinfer/pinfer/internal/outpath"
	"github.com/pinfer/pinfer/ops"
)

// A session's state saved to a file and read back: llama-cli's prompt
// cache (--prompt-cache) and llama-server's slot files (/slots/{id}) both
// use it. The file, all little-endian:
//
//	"PIST" u32 version (1)
//	u64 model file size, [32] model fingerprint (gguf.File.Fingerprint)
//	u16 length + graph name, [32] graph fingerprint (its bound nodes)
//	u32 n_ctx of the session that saved it, u32 KV type (ops.DType), u32 n_tokens
//	u32 nodes; per node: u32 index in Program.Nodes, u32 planes;
//	    per plane: u32 runs, u32 width
//	n_tokens × u32: the tokens at positions 0..n_tokens-1
//	per node, plane and run: n_tokens × width values (f32 or f16, the KV type)
//	u32 CRC-32C of every byte before it
//
// Only the positions used are written, not the whole context: a state of
// n tokens restores into any session of the same model, graph and KV type
// whose context holds n. A node's state is any ops.PosState (attention's
// KV cache, head-major: each plane's runs are its kv heads), written and
// read by one code path over its planes. A program that stands in for
// another (Program.StateOf: the device executor's step, its caches on the
// GPU) writes and reads the other's nodes through host planes, so that a
// file crosses between them.

// stateMagic opens a state file; StateVersion is the format it has.
const (
	stateMagic   = "PIST"
	StateVersion = 1
)

// Limits on what a state file's header may claim, checked before anything
// is made from it.
const (
	maxGraphName   = 1 << 10
	maxStatePlanes = 16
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// StateMismatchError is LoadState's refusal of a file that another model,
// graph or KV cache type saved, or that holds more positions than the
// session's context: Field names what differs, Detail how.
type StateMismatchError struct {
	Field  string // "model", "graph", "kv type", "context" or "layout"
	Detail string
}

func (e *StateMismatchError) Error() string {
	return fmt.Sprintf("%s mismatch: %s", e.Field, e.Detail)
}

// StateFileError is LoadState's refusal of a file that is not a state
// file of this format, or is corrupt or truncated.
type StateFileError struct{ Msg string }

func (e *StateFileError) Error() string { return e.Msg }

func badState(format string, args ...any) error {
	return &StateFileError{fmt.Sprintf(format, args...)}
}

// modelID binds a state to the model file and graph that made it.
type modelID struct {
	size      int64
	hash      [32]byte
	graph     string
	graphHash [32]byte
}

// stateID is p's modelID (the file's fingerprint is made once, the
// graph's, of its nodes alone, each time).
func (p *Program) stateID() modelID {
	var id modelID
	if p.file != nil {
		id.size, id.hash = p.file.Size(), p.file.Fingerprint()
	}
	id.graph = p.Spec.Name
	if id.graph == "" {
		id.graph = p.Spec.Arch
	}
	id.graphHash = p.fingerprint()
	return id
}

// fingerprint hashes what the graph makes of the model: each node's op,
// inputs, width, attributes and weights' names, in execution order. Two
// graph files that compute the same caches give the same one.
func (p *Program) fingerprint() [32]byte {
	h := sha256.New()
	for i, n := range p.Nodes {
		fmt.Fprintf(h, "%d %s %s %v %d", i, n.ID, n.Op.Name, n.In, n.Cols)
		keys := make([]string, 0, len(n.A))
		for k := range n.A {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(h, " %s=%v", k, n.A[k])
		}
		for _, w := range n.W {
			if w != nil {
				fmt.Fprintf(h, " w:%s", w.Name)
			}
		}
		h.Write([]byte{'\n'})
	}
	var sum [32]byte
	h.Sum(sum[:0])
	return sum
}

// inWidths is node n's input widths, as its op's Shape saw them.
func (p *Program) inWidths(n *Node) []int {
	w := make([]int, len(n.In))
	for k, src := range n.In {
		w[k] = 1
		if src >= 0 {
			w[k] = p.Nodes[src].Cols
		}
	}
	return w
}

// stateNodes is the nodes whose ops keep a per-sequence state.
func (p *Program) stateNodes() []int {
	var out []int
	for i, n := range p.Nodes {
		if n.Op.NewState != nil || n.Op.PosFloats != nil {
			out = append(out, i)
		}
	}
	return out
}

// planes returns node i's state as planes, made (empty) if the session has
// none yet and create is set; nil with create unset and no state.
func (s *Session) planes(i int, create bool) ([]ops.Plane, error) {
	n := s.p.Nodes[i]
	st := s.state[i]
	if st == nil {
		if !create {
			return nil, nil
		}
		if n.Op.NewState == nil {
			return nil, fmt.Errorf("%s: op %s keeps a state that cannot be restored", n.Where, n.Op.Name)
		}
		ps := n.Op.NewState(ops.Row{NCtx: s.nctx, KV: s.kv}, s.p.inWidths(n), n.A)
		s.state[i], s.started = ps, true
		return ps.Planes(), nil
	}
	ps, ok := st.(ops.PosState)
	if !ok {
		return nil, fmt.Errorf("%s: op %s keeps a state (%T) that cannot be saved or restored", n.Where, n.Op.Name, st)
	}
	return ps.Planes(), nil
}

// stateProg is the program whose nodes the session's state files name:
// the one it stands in for, if any (Program.StateOf).
func (p *Program) stateProg() *Program {
	if p.StateOf != nil {
		return p.StateOf
	}
	return p
}

// saved is a state node (its index in stateProg's Nodes) and its planes.
type saved struct {
	node   int
	planes []ops.Plane
}

// savedNodes returns every state node's planes, which hold the session's
// positions.
func (s *Session) savedNodes() ([]saved, error) {
	if s.p.StateOf != nil {
		return s.heldNodes()
	}
	want := s.p.stateNodes()
	var nodes []saved
	for i := range s.p.Nodes {
		if s.state[i] == nil && !slices.Contains(want, i) {
			continue
		}
		// A state of another kind fails here: the file would hold the
		// tokens without their caches.
		ps, err := s.planes(i, false)
		if err != nil {
			return nil, err
		}
		if ps == nil || !slices.Contains(want, i) {
			return nil, fmt.Errorf("%s: op %s: no cache to save after %d positions", s.p.Nodes[i].Where, s.p.Nodes[i].Op.Name, s.pos)
		}
		nodes = append(nodes, saved{i, ps})
	}
	return nodes, nil
}

// heldNodes is savedNodes for a program that stands in for another: the
// planes that a restore left, or the held state's positions downloaded
// into host planes of the source's layout.
func (s *Session) heldNodes() ([]saved, error) {
	src, at := s.p.StateOf, s.p.StateAt
	want := src.stateNodes()
	var planes [][]ops.Plane
	switch st := s.state[at].(type) {
	case *ops.Restored:
		planes = st.Planes
	case ops.HeldState:
		planes = src.hostPlanes(want, s.pos, s.kv)
		if err := st.Download(planes, s.pos); err != nil {
			return nil, fmt.Errorf("%s: %v", s.p.Nodes[at].Where, err)
		}
	default:
		return nil, fmt.Errorf("%s: op %s: no cache to save after %d positions", s.p.Nodes[at].Where, s.p.Nodes[at].Op.Name, s.pos)
	}
	nodes := make([]saved, len(want))
	for k, i := range want {
		nodes[k] = saved{i, planes[k]}
	}
	return nodes, nil
}

// hostPlanes makes, for each of nodes, the planes of an empty state of n
// positions of kv: what a held state is read into and written from.
func (p *Program) hostPlanes(nodes []int, n int, kv ops.DType) [][]ops.Plane {
	out := make([][]ops.Plane, len(nodes))
	for k, i := range nodes {
		nd := p.Nodes[i]
		out[k] = nd.Op.NewState(ops.Row{NCtx: n, KV: kv}, p.inWidths(nd), nd.A).Planes()
	}
	return out
}

// SaveState writes the session's tokens and the state of its positions
// (the format above) and returns the bytes written.
func (s *Session) SaveState(w io.Writer) (int64, error) {
	id := s.p.stateProg().stateID()
	if len(id.graph) > maxGraphName {
		return 0, fmt.Errorf("graph name of %d bytes: at most %d", len(id.graph), maxGraphName)
	}
	sw := &stateWriter{w: bufio.NewWriterSize(w, 1<<16), crc: crc32.New(castagnoli)}
	sw.bytes([]byte(stateMagic))
	sw.u32(StateVersion)
	sw.u64(uint64(id.size))
	sw.bytes(id.hash[:])
	sw.u16(uint16(len(id.graph)))
	sw.bytes([]byte(id.graph))
	sw.bytes(id.graphHash[:])
	sw.u32(uint32(s.nctx))
	sw.u32(uint32(s.kv))
	sw.u32(uint32(s.pos))
	var nodes []saved
	if s.pos > 0 {
		var err error
		if nodes, err = s.savedNodes(); err != nil {
			return 0, err
		}
	}
	sw.u32(uint32(len(nodes)))
	for _, n := range nodes {
		sw.u32(uint32(n.node))
		sw.u32(uint32(len(n.planes)))
		for _, pl := range n.planes {
			sw.u32(uint32(pl.Runs))
			sw.u32(uint32(pl.Width))
		}
	}
	for _, t := range s.toks {
		sw.u32(uint32(t))
	}
	for _, n := range nodes {
		for _, pl := range n.planes {
			for g := range pl.Runs {
				at, cnt := g*pl.NCtx*pl.Width, s.pos*pl.Width
				if pl.F16 != nil {
					writeVals(sw, pl.F16[at:at+cnt])
				} else {
					writeVals(sw, pl.F32[at:at+cnt])
				}
			}
		}
	}
	sw.u32raw(sw.crc.Sum32())
	if sw.err == nil {
		sw.err = sw.w.Flush()
	}
	return sw.n, sw.err
}

// LoadState replaces the session's positions with a saved state's and
// returns how many positions it holds and the bytes read. A file that
// another model, graph or KV cache type saved, or that holds more
// positions than the context, is refused with a *StateMismatchError
// before the session changes; a corrupt or truncated file with an error
// saying so, never a panic. Once the header has passed, the session is
// emptied first: if the rest then fails, it holds no positions.
func (s *Session) LoadState(r io.Reader) (int, int64, error) {
	sr := &stateReader{r: bufio.NewReaderSize(r, 1<<16), crc: crc32.New(castagnoli)}
	n, err := s.loadState(sr)
	return n, sr.n, err
}

func (s *Session) loadState(sr *stateReader) (int, error) {
	magic := sr.bytes(4)
	if sr.err != nil {
		return 0, sr.fail()
	}
	if string(magic) != stateMagic {
		return 0, badState("not a pinfer state file (it begins %q, not %q)", magic, stateMagic)
	}
	if v := sr.u32(); sr.err == nil && v != StateVersion {
		return 0, badState("state file version %d: this pinfer reads version %d", v, StateVersion)
	}
	size := sr.u64()
	hash := slices.Clone(sr.bytes(32))
	glen := int(sr.u16())
	if sr.err != nil {
		return 0, sr.fail()
	}
	if glen > maxGraphName {
		return 0, badState("corrupt state file: a graph name of %d bytes", glen)
	}
	gname := string(sr.bytes(glen)) // a copy, before the next read reuses the buffer
	ghash := slices.Clone(sr.bytes(32))
	nctx, kv, ntok := sr.u32(), ops.DType(sr.u32()), sr.u32()
	if sr.err != nil {
		return 0, sr.fail()
	}
	src := s.p.stateProg()
	id := src.stateID()
	switch {
	case size != uint64(id.size) || string(hash) != string(id.hash[:]):
		return 0, &StateMismatchError{"model", fmt.Sprintf("the file's model is %d bytes, fingerprint %s; this one %d bytes, %s",
			size, short(hash), id.size, short(id.hash[:]))}
	case gname != id.graph || string(ghash) != string(id.graphHash[:]):
		return 0, &StateMismatchError{"graph", fmt.Sprintf("the file's is %q (fingerprint %s), this one %q (%s)",
			gname, short(ghash), id.graph, short(id.graphHash[:]))}
	case kv != s.kv:
		return 0, &StateMismatchError{"kv type", fmt.Sprintf("the file's cache is %s, this session's %s", dtypeName(kv), dtypeName(s.kv))}
	case ntok > uint32(s.nctx):
		return 0, &StateMismatchError{"context", fmt.Sprintf("the file holds %d positions (saved with a context of %d), more than this context of %d",
			ntok, nctx, s.nctx)}
	}
	n := int(ntok)
	want := src.stateNodes()
	if n == 0 {
		want = nil // an empty session saves no caches
	}
	nn := sr.u32()
	if sr.err != nil {
		return 0, sr.fail()
	}
	if nn != uint32(len(want)) {
		return 0, &StateMismatchError{"layout", fmt.Sprintf("the file has %d cache nodes, this graph %d", nn, len(want))}
	}
	held := s.p.StateOf != nil // its state is replaced whole, below
	for i, st := range s.state {
		if _, ok := st.(ops.PosState); !held && st != nil && (!ok || !slices.Contains(s.p.stateNodes(), i)) {
			return 0, fmt.Errorf("%s: op %s keeps a state (%T) that cannot be restored", s.p.Nodes[i].Where, s.p.Nodes[i].Op.Name, st)
		}
	}
	// The geometry of every node first, then the session changes.
	type shape struct{ runs, width uint32 }
	shapes := make([][]shape, len(want))
	for k, i := range want {
		idx, np := sr.u32(), sr.u32()
		if sr.err != nil {
			return 0, sr.fail()
		}
		if idx != uint32(i) {
			return 0, &StateMismatchError{"layout", fmt.Sprintf("cache node %d is node %d in the file, %d in this graph", k, idx, i)}
		}
		if np > maxStatePlanes {
			return 0, badState("corrupt state file: node %d has %d planes", i, np)
		}
		for range np {
			shapes[k] = append(shapes[k], shape{sr.u32(), sr.u32()})
		}
		if sr.err != nil {
			return 0, sr.fail()
		}
	}
	planes := make([][]ops.Plane, len(want))
	if held {
		// Host planes of just the file's positions, uploaded when the
		// held state's op next runs.
		planes = src.hostPlanes(want, n, s.kv)
	}
	for k, i := range want {
		ps := planes[k]
		if !held {
			var err error
			if ps, err = s.planes(i, true); err != nil {
				return 0, err
			}
		}
		got := shapes[k]
		match := len(got) == len(ps)
		for j := 0; match && j < len(ps); j++ {
			match = got[j] == shape{uint32(ps[j].Runs), uint32(ps[j].Width)}
		}
		if !match {
			return 0, &StateMismatchError{"layout", fmt.Sprintf("%s: the file's cache is %v (runs, width), this graph's %v", src.Nodes[i].Where, got, shapesOf(ps))}
		}
		for _, pl := range ps {
			if !held && pl.NCtx < s.nctx {
				return 0, fmt.Errorf("%s: its cache holds %d positions, the session %d", s.p.Nodes[i].Where, pl.NCtx, s.nctx)
			}
		}
		planes[k] = ps
	}

	// From here on the caches are overwritten: the session holds nothing
	// until the whole file has been read and checked.
	s.Reset()
	toks := make([]int, n, s.nctx)
	for k := range toks {
		t := sr.u32()
		if sr.err != nil {
			return 0, sr.fail()
		}
		if t >= uint32(s.p.Vocab) {
			return 0, badState("corrupt state file: token %d is %d, outside the vocabulary of %d", k, t, s.p.Vocab)
		}
		toks[k] = int(t)
	}
	for _, ps := range planes {
		for _, pl := range ps {
			for g := range pl.Runs {
				at, cnt := g*pl.NCtx*pl.Width, n*pl.Width
				if pl.F16 != nil {
					readVals(sr, pl.F16[at:at+cnt])
				} else {
					readVals(sr, pl.F32[at:at+cnt])
				}
				if sr.err != nil {
					return 0, sr.fail()
				}
			}
		}
	}
	sum := sr.crc.Sum32()
	got := sr.u32raw()
	if sr.err != nil {
		return 0, sr.fail()
	}
	if got != sum {
		return 0, badState("corrupt state file: checksum %08x, the contents' %08x", got, sum)
	}
	if _, err := sr.r.ReadByte(); err != io.EOF {
		if err != nil {
			return 0, fmt.Errorf("reading the state file: %v", err)
		}
		return 0, badState("corrupt state file: bytes after its checksum")
	}
	if held && n > 0 {
		s.state[s.p.StateAt], s.started = &ops.Restored{Planes: planes, N: n}, true
	}
	s.pos, s.toks = n, toks
	return n, nil
}

func shapesOf(ps []ops.Plane) string {
	var b strings.Builder
	b.WriteString("[")
	for j, p := range ps {
		if j > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "{%d %d}", p.Runs, p.Width)
	}
	b.WriteString("]")
	return b.String()
}

func short(h []byte) string { return hex.EncodeToString(h[:min(len(h), 6)]) }

func dtypeName(t ops.DType) string {
	if t == ops.F32 || t == ops.F16 {
		return t.String()
	}
	return fmt.Sprintf("type %d", uint32(t))
}

// SaveStateFile writes the session's state to path through a temporary
// file in the same directory, renamed over path once complete, so that a
// reader never sees half a file. It returns the bytes written.
func (s *Session) SaveStateFile(path string) (n int64, err error) {
	err = outpath.Replace(path, func(w io.Writer) error {
		n, err = s.SaveState(w)
		return err
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// LoadStateFile is LoadState from the file at path.
func (s *Session) LoadStateFile(path string) (int, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	return s.LoadState(f)
}

// stateWriter writes little-endian values, summing them as it goes; the
// first error sticks.
type stateWriter struct {
	w   *bufio.Writer
	crc hash.Hash32
	n   int64
	err error
	buf [8]byte
}

func (w *stateWriter) bytes(b []byte) {
	if w.err != nil {
		return
	}
	w.crc.Write(b)
	var k int
	k, w.err = w.w.Write(b)
	w.n += int64(k)
}

func (w *stateWriter) u16(v uint16) {
	binary.LittleEndian.PutUint16(w.buf[:], v)
	w.bytes(w.buf[:2])
}

func (w *stateWriter) u32(v uint32) {
	binary.LittleEndian.PutUint32(w.buf[:], v)
	w.bytes(w.buf[:4])
}

func (w *stateWriter) u64(v uint64) {
	binary.LittleEndian.PutUint64(w.buf[:], v)
	w.bytes(w.buf[:8])
}

// u32raw writes v outside the checksum (the checksum itself).
func (w *stateWriter) u32raw(v uint32) {
	if w.err != nil {
		return
	}
	binary.LittleEndian.PutUint32(w.buf[:], v)
	var k int
	k, w.err = w.w.Write(w.buf[:4])
	w.n += int64(k)
}

// stateReader reads little-endian values, summing them as it goes; the
// first error sticks.
type stateReader struct {
	r   *bufio.Reader
	crc hash.Hash32
	n   int64
	err error
	buf [64 << 10]byte
}

// fail is the error that stopped the reader, as one line.
func (r *stateReader) fail() error {
	if errors.Is(r.err, io.EOF) || errors.Is(r.err, io.ErrUnexpectedEOF) {
		return badState("corrupt state file: it ends at byte %d (truncated)", r.n)
	}
	return fmt.Errorf("reading the state file: %v", r.err)
}

// bytes reads n bytes (n at most len(buf)) into buf; the result is valid
// until the next read.
func (r *stateReader) bytes(n int) []byte {
	if r.err != nil {
		return make([]byte, n)
	}
	b := r.buf[:n]
	var k int
	k, r.err = io.ReadFull(r.r, b)
	r.n += int64(k)
	r.crc.Write(b[:k])
	return b
}

func (r *stateReader) u16() uint16 { return binary.LittleEndian.Uint16(r.bytes(2)) }
func (r *stateReader) u32() uint32 { return binary.LittleEndian.Uint32(r.bytes(4)) }
func (r *stateReader) u64() uint64 { return binary.LittleEndian.Uint64(r.bytes(8)) }

// u32raw reads a value outside the checksum (the checksum itself).
func (r *stateReader) u32raw() uint32 {
	if r.err != nil {
		return 0
	}
	b := r.buf[:4]
	var k int
	k, r.err = io.ReadFull(r.r, b)
	r.n += int64(k)
	return binary.LittleEndian.Uint32(b)
}

// value is a cache's element type: f32, or f16 as its bits.
type value interface{ float32 | uint16 }

func elemSize[T value]() int {
	var z T
	if _, ok := any(z).(uint16); ok {
		return 2
	}
	return 4
}

// writeVals writes v little-endian, a buffer at a time.
func writeVals[T value](w *stateWriter, v []T) {
	var buf [64 << 10]byte
	sz := elemSize[T]()
	for len(v) > 0 && w.err == nil {
		k := min(len(v), len(buf)/sz)
		encode(buf[:k*sz], v[:k])
		w.bytes(buf[:k*sz])
		v = v[k:]
	}
}

// readVals fills v from little-endian bytes, a buffer at a time.
func readVals[T value](r *stateReader, v []T) {
	sz := elemSize[T]()
	for len(v) > 0 && r.err == nil {
		k := min(len(v), len(r.buf)/sz)
		decode(v[:k], r.bytes(k*sz))
		v = v[k:]
	}
}

func encode[T value](b []byte, v []T) {
	switch v := any(v).(type) {
	case []float32:
		for i, x := range v {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
		}
	case []uint16:
		for i, x := range v {
			binary.LittleEndian.PutUint16(b[2*i:], x)
		}
	}
}

func decode[T value](v []T, b []byte) {
	switch v := any(v).(type) {
	case []float32:
		for i := range v {
			v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
	case []uint16:
		for i := range v {
			v[i] = binary.LittleEndian.Uint16(b[2*i:])
		}
	}
}
