package graph

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pinfer/pinfer/gguf"
	"github.com/pinfer/pinfer/internal/fixtures"
	"github.com/pinfer/pinfer/ops"
	"github.com/stretchr/testify/require"
)

type traceStep = fixtures.TraceStep

func storiesTrace(t testing.TB) []traceStep { return fixtures.StoriesTrace(t, 60) }

// checkTop5 holds logits to llama.cpp's top five of the step, as the
// engine's stories tests do.
func checkTop5(t *testing.T, st traceStep, logits []float32, tol float64, what string) {
	t.Helper()
	for k, ref := range st.Top5 {
		require.InDelta(t, ref[1], logits[int(ref[0])], tol, "%s rank %d", what, k)
	}
}

// savedAfter runs the trace's first n inputs in a session of p and returns
// its saved state.
func savedAfter(t testing.TB, p *Program, kv ops.DType, steps []traceStep, n int) []byte {
	sess := p.NewSession(64, nil)
	require.NoError(t, sess.SetKVType(kv))
	var in []int
	for _, st := range steps[:n] {
		in = append(in, st.InputToken)
	}
	_, err := sess.Forward(in, false)
	require.NoError(t, err)
	var buf bytes.Buffer
	w, err := sess.SaveState(&buf)
	require.NoError(t, err)
	require.Equal(t, int64(buf.Len()), w)
	return buf.Bytes()
}

// A state saved after 20 of llama.cpp's greedy steps, restored into a
// fresh session of another context size, goes on to llama.cpp's logits
// step by step: the restored positions are what the run had made. For
// both cache types (f16's tolerance as the engine's f16 test).
func TestStateRestoresTrace(t *testing.T) {
	p, err := build(t, llamaTOML(t))
	require.NoError(t, err)
	steps := storiesTrace(t)
	for _, kv := range []ops.DType{ops.F32, ops.F16} {
		t.Run(kv.String(), func(t *testing.T) {
			tol := map[ops.DType]float64{ops.F32: 1e-3, ops.F16: 0.02}[kv]
			file := savedAfter(t, p, kv, steps, 20)
			// Only the 20 positions used are written, not the context's 64.
			perPos := 0
			for _, n := range p.Nodes {
				perPos += n.PosFloats
			}
			require.Less(t, len(file), 20*perPos*kv.BlockBytes()+1024)
			require.Greater(t, len(file), 20*perPos*kv.BlockBytes())

			sess := p.NewSession(100, nil)
			require.NoError(t, sess.SetKVType(kv))
			n, read, err := sess.LoadState(bytes.NewReader(file))
			require.NoError(t, err)
			require.Equal(t, 20, n)
			require.Equal(t, int64(len(file)), read)
			require.Equal(t, 20, sess.Pos())
			for i, st := range steps[:20] {
				require.Equal(t, st.InputToken, sess.Tokens()[i])
			}
			for i := 20; i < 60; i++ {
				logits, err := sess.Forward([]int{steps[i].InputToken}, false)
				require.NoError(t, err)
				checkTop5(t, steps[i], logits.Data, tol, "step")
			}
		})
	}
}

// The file is refused, with a one-line error naming what differs and the
// session left as it was, when another model, graph, KV type or a context
// too small for it would read it.
func TestStateMismatch(t *testing.T) {
	p, err := build(t, llamaTOML(t))
	require.NoError(t, err)
	steps := storiesTrace(t)
	file := savedAfter(t, p, ops.F32, steps, 20)

	// The same file with one weight's first byte changed: its header is
	// the same, byte for byte.
	orig := fixtures.Path(t, "stories260K", "stories260K.gguf")
	b, err := os.ReadFile(orig)
	require.NoError(t, err)
	f0 := stories(t)
	b[f0.DataOffset+f0.Tensors[0].Offset] ^= 0x40
	other := filepath.Join(t.TempDir(), "other.gguf")
	require.NoError(t, os.WriteFile(other, b, 0o644))
	f1, err := gguf.Open(other)
	require.NoError(t, err)
	defer f1.Close()
	spec, err := ParseSpec("llama.toml", []byte(llamaTOML(t)))
	require.NoError(t, err)
	otherModel, err := Build(spec, f1)
	require.NoError(t, err)

	// The same graph with another epsilon in one norm.
	edited := strings.Replace(llamaTOML(t), `weight = "blk.{i}.attn_norm.weight", eps = "eps"`, `weight = "blk.{i}.attn_norm.weight", eps = 1e-3`, 1)
	require.NotEqual(t, llamaTOML(t), edited)
	otherGraph, err := build(t, edited)
	require.NoError(t, err)

	cases := []struct {
		name  string
		p     *Program
		nctx  int
		kv    ops.DType
		field string
		want  []string
	}{
		{"model", otherModel, 64, ops.F32, "model", []string{"model mismatch", "fingerprint"}},
		{"graph", otherGraph, 64, ops.F32, "graph", []string{"graph mismatch", `"llama"`}},
		{"kv type", p, 64, ops.F16, "kv type", []string{"kv type mismatch", "f32", "f16"}},
		{"context", p, 19, ops.F32, "context", []string{"context mismatch", "20 positions", "context of 19"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sess := c.p.NewSession(c.nctx, nil)
			require.NoError(t, sess.SetKVType(c.kv))
			_, err := sess.Forward([]int{1, 2, 3}, false)
			require.NoError(t, err)
			_, _, err = sess.LoadState(bytes.NewReader(file))
			require.Error(t, err)
			var mm *StateMismatchError
			require.True(t, errors.As(err, &mm), "%v", err)
			require.Equal(t, c.field, mm.Field)
			require.NotContains(t, err.Error(), "\n")
			for _, w := range c.want {
				require.Contains(t, err.Error(), w)
			}
			require.Equal(t, []int{1, 2, 3}, sess.Tokens(), "the session is left as it was")
		})
	}
	require.NotEqual(t, stories(t).Fingerprint(), f1.Fingerprint())
}

// A truncated, corrupted or foreign file is refused with one line, never
// a panic, and the session holds no positions it did not get.
func TestStateCorrupt(t *testing.T) {
	p, err := build(t, llamaTOML(t))
	require.NoError(t, err)
	steps := storiesTrace(t)
	file := savedAfter(t, p, ops.F32, steps, 3)
	sess := p.NewSession(8, nil)

	check := func(b []byte, want string) {
		t.Helper()
		_, err := sess.Forward([]int{1, 2}, false)
		require.NoError(t, err)
		n, _, err := sess.LoadState(bytes.NewReader(b))
		require.Error(t, err, "%d bytes", len(b))
		require.Zero(t, n)
		require.NotContains(t, err.Error(), "\n")
		require.Contains(t, err.Error(), want, "%d bytes", len(b))
		require.True(t, sess.Pos() == 0 || sess.Pos() == 2, "pos %d", sess.Pos())
		require.Len(t, sess.Tokens(), sess.Pos())
		sess.Reset()
	}
	for n := range len(file) {
		check(file[:n], "truncated")
	}
	perPos := 0
	for _, n := range p.Nodes {
		perPos += n.PosFloats
	}
	tokensAt := len(file) - 4 - 3*perPos*4 - 3*4
	// Bytes of the tokens and the caches flipped (a sample, to keep it short).
	for i := tokensAt; i < len(file)-4; i += 97 {
		b := bytes.Clone(file)
		b[i] ^= 0x01
		check(b, "checksum")
	}
	check(append(bytes.Clone(file), 0), "bytes after its checksum")
	check([]byte("GGUF\x03\x00\x00\x00 and the rest"), "not a pinfer state file")
	b := bytes.Clone(file)
	b[4] = 9
	check(b, "version 9")
	// A token outside the vocabulary, the checksum made to match.
	b = bytes.Clone(file)
	binary.LittleEndian.PutUint32(b[tokensAt+4:], 512)
	binary.LittleEndian.PutUint32(b[len(b)-4:], crc32.Checksum(b[:len(b)-4], castagnoli))
	check(b, "token 1 is 512, outside the vocabulary of 512")
	_, _, err = sess.LoadState(bytes.NewReader(file))
	require.NoError(t, err)
	require.Equal(t, 3, sess.Pos())
}

// FuzzLoadState: whatever the bytes, LoadState returns (an error or a
// state) without panicking, and the session stays usable.
func FuzzLoadState(f *testing.F) {
	p, err := build(f, llamaTOML(f))
	if err != nil {
		f.Fatal(err)
	}
	steps := storiesTrace(f)
	file := savedAfter(f, p, ops.F32, steps, 3)
	f.Add(file)
	f.Add(file[:60])
	f.Add(file[:len(file)-1])
	f.Add(savedAfter(f, p, ops.F32, steps, 1))
	f.Add([]byte(stateMagic))
	f.Add([]byte{})
	sess := p.NewSession(8, nil)
	f.Fuzz(func(t *testing.T, b []byte) {
		n, read, err := sess.LoadState(bytes.NewReader(b))
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("a multi-line error: %q", err)
			}
			if n != 0 {
				t.Fatalf("an error and %d positions", n)
			}
		} else if n != sess.Pos() || read != int64(len(b)) {
			t.Fatalf("loaded %d positions from %d bytes, the session has %d, the input %d bytes", n, read, sess.Pos(), len(b))
		}
		if len(sess.Tokens()) != sess.Pos() {
			t.Fatalf("%d tokens for %d positions", len(sess.Tokens()), sess.Pos())
		}
		if err == nil && sess.Pos() < 8 {
			// What it restored runs on.
			if _, err := sess.Forward([]int{1}, false); err != nil {
				t.Fatal(err)
			}
		}
		sess.Reset()
	})
}
