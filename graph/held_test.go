package graph

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/pinfer/pinfer/ops"
	"github.com/stretchr/testify/require"
)

// A program that stands in for another (a device executor's one step) and
// holds its caches where the host cannot read them saves and restores them
// in the source program's format. The stand-in here runs the source
// program in a session of its own and moves positions in and out of it
// through position-major buffers, as a GPU's copies do.

// standIn returns a one-node program that runs src, its state held.
func standIn(src *Program) *Program {
	op := &ops.Op{Name: "stand_in", Inputs: 2, LastRows: true, Run: func(c *ops.Ctx) error {
		for t, r := range c.Rows {
			h, err := heldOf(src, r)
			if err != nil {
				return err
			}
			// Positions are kept per position, as a device's caches are:
			// going back (a reset, a truncation) overwrites what follows.
			if r.Pos > h.inner.Pos() {
				return fmt.Errorf("stand-in at position %d, asked for %d", h.inner.Pos(), r.Pos)
			}
			h.inner.Truncate(r.Pos)
			logits, err := h.inner.Forward([]int{int(c.In[0].Data[t])}, false)
			if err != nil {
				return err
			}
			for k, want := range c.OutRows {
				if want == t {
					copy(c.Out.Row(k), logits.Data)
				}
			}
			if c.OutRows == nil {
				copy(c.Out.Row(t), logits.Data)
			}
		}
		return nil
	}}
	n := &Node{Where: "stand-in", ID: "stand_in", Op: op, In: []int{srcTokens, srcPositions}, A: ops.Attrs{}, Cols: src.Vocab}
	return &Program{Spec: src.Spec, Params: src.Params, Nodes: []*Node{n}, Vocab: src.Vocab, StateOf: src}
}

// held is the stand-in's state: a session of the source program.
type held struct {
	src   *Program
	inner *Session
}

// heldOf returns the row's state, made on first use; restored positions
// are copied in through the position-major layout.
func heldOf(src *Program, r ops.Row) (*held, error) {
	switch st := (*r.State).(type) {
	case *held:
		return st, nil
	case nil, *ops.Restored:
		h := &held{src: src, inner: src.NewSession(r.NCtx, nil)}
		if err := h.inner.SetKVType(r.KV); err != nil {
			return nil, err
		}
		if rs, ok := st.(*ops.Restored); ok {
			for k, i := range src.stateNodes() {
				dst, err := h.inner.planes(i, true)
				if err != nil {
					return nil, err
				}
				for j, pl := range rs.Planes[k] {
					buf := make([]float32, rs.N*pl.Runs*pl.Width)
					pl.PosMajor(buf, rs.N)
					dst[j].SetPosMajor(buf, rs.N)
				}
			}
			// The tokens are the outer session's; the inner one needs
			// only its position.
			h.inner.pos, h.inner.toks = rs.N, make([]int, rs.N)
		}
		*r.State = h
		return h, nil
	}
	return nil, fmt.Errorf("stand-in: state %T", *r.State)
}

func (h *held) Download(dst [][]ops.Plane, n int) error {
	for k, i := range h.src.stateNodes() {
		ps, err := h.inner.planes(i, false)
		if err != nil {
			return err
		}
		for j, pl := range ps {
			buf := make([]float32, n*pl.Runs*pl.Width)
			pl.PosMajor(buf, n)
			dst[k][j].SetPosMajor(buf, n)
		}
	}
	return nil
}

func forwardTrace(t *testing.T, s *Session, steps []traceStep, from, to int, tol float64) {
	t.Helper()
	for i := from; i < to; i++ {
		logits, err := s.Forward([]int{steps[i].InputToken}, false)
		require.NoError(t, err)
		checkTop5(t, steps[i], logits.Data, tol, fmt.Sprintf("step %d", i))
	}
}

func saveOf(t *testing.T, s *Session) []byte {
	t.Helper()
	var buf bytes.Buffer
	_, err := s.SaveState(&buf)
	require.NoError(t, err)
	return buf.Bytes()
}

func TestHeldStateCrossesPrograms(t *testing.T) {
	p, err := build(t, llamaTOML(t))
	require.NoError(t, err)
	h := standIn(p)
	steps := storiesTrace(t)
	for _, kv := range []ops.DType{ops.F32, ops.F16} {
		t.Run(kv.String(), func(t *testing.T) {
			tol := map[ops.DType]float64{ops.F32: 1e-3, ops.F16: 0.02}[kv]
			session := func(p *Program) *Session {
				s := p.NewSession(64, nil)
				require.NoError(t, s.SetKVType(kv))
				return s
			}
			// The same 20 steps, token by token, on either program save
			// the same file: the held caches come out in the source's
			// layout.
			cs := session(p)
			forwardTrace(t, cs, steps, 0, 20, tol)
			cpu := saveOf(t, cs)
			hs := session(h)
			forwardTrace(t, hs, steps, 0, 20, tol)
			require.Equal(t, cpu, saveOf(t, hs))

			// The source's file into the stand-in: saved again before it
			// runs, it is the same file; run on, it follows llama.cpp.
			hs = session(h)
			n, _, err := hs.LoadState(bytes.NewReader(cpu))
			require.NoError(t, err)
			require.Equal(t, 20, n)
			require.Equal(t, cpu, saveOf(t, hs))
			forwardTrace(t, hs, steps, 20, 30, tol)
			held30 := saveOf(t, hs)

			// The stand-in's file into the source program goes on the same.
			cs = session(p)
			_, _, err = cs.LoadState(bytes.NewReader(held30))
			require.NoError(t, err)
			require.Equal(t, 30, cs.Pos())
			forwardTrace(t, cs, steps, 30, 40, tol)

			// And against a run of the source that never left it.
			ref := session(p)
			forwardTrace(t, ref, steps, 0, 30, tol)
			require.Equal(t, saveOf(t, ref), held30)
		})
	}
}

// A stand-in that has not run holds nothing to save; one whose state is
// not held says so by name.
func TestHeldStateNothingToSave(t *testing.T) {
	p, err := build(t, llamaTOML(t))
	require.NoError(t, err)
	h := standIn(p)
	s := h.NewSession(16, nil)
	file := saveOf(t, s)
	back := p.NewSession(16, nil)
	n, _, err := back.LoadState(bytes.NewReader(file))
	require.NoError(t, err)
	require.Zero(t, n)

	s.pos, s.state[0] = 3, "not held"
	_, err = s.SaveState(&bytes.Buffer{})
	require.ErrorContains(t, err, "stand-in: op stand_in: no cache to save after 3 positions")
}

// A file the stand-in cannot take is refused as the source program refuses
// it: a mismatch before anything changes, a truncated file with the session
// emptied; either way the held state is not replaced, and the session goes
// on from what it holds.
func TestHeldStateRefusals(t *testing.T) {
	p, err := build(t, llamaTOML(t))
	require.NoError(t, err)
	h := standIn(p)
	steps := storiesTrace(t)
	file := savedAfter(t, p, ops.F32, steps, 20)

	s := h.NewSession(64, nil)
	require.NoError(t, s.SetKVType(ops.F16))
	forwardTrace(t, s, steps, 0, 3, 0.02)
	before := s.state[0]
	_, _, err = s.LoadState(bytes.NewReader(file))
	var mm *StateMismatchError
	require.ErrorAs(t, err, &mm)
	require.Equal(t, "kv type", mm.Field)
	require.Equal(t, 3, s.Pos())
	require.Same(t, before, s.state[0])
	forwardTrace(t, s, steps, 3, 6, 0.02)

	s = h.NewSession(64, nil)
	forwardTrace(t, s, steps, 0, 3, 1e-3)
	before = s.state[0]
	_, _, err = s.LoadState(bytes.NewReader(file[:len(file)-100]))
	require.ErrorContains(t, err, "truncated")
	require.Zero(t, s.Pos())
	require.Same(t, before, s.state[0])
	forwardTrace(t, s, steps, 0, 5, 1e-3)
}
