package gguf

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pinfer/pinfer/internal/fixtures"

	"github.com/stretchr/testify/require"
)

// modelsDir is shared/models beside the checkout (a missing one fails the test).
func modelsDir(t testing.TB) string { return fixtures.Dir(t) }

// raw builds GGUF bytes by hand, independently of Writer, so tests can
// describe malformed files exactly.
type raw struct{ bytes.Buffer }

func (r *raw) u32(v uint32) *raw { binary.Write(&r.Buffer, binary.LittleEndian, v); return r }
func (r *raw) u64(v uint64) *raw { binary.Write(&r.Buffer, binary.LittleEndian, v); return r }
func (r *raw) str(s string) *raw { r.u64(uint64(len(s))); r.WriteString(s); return r }
func (r *raw) pad(a int) *raw {
	for r.Len()%a != 0 {
		r.WriteByte(0)
	}
	return r
}

func header(magic string, version uint32, nTensors, nKVs uint64) *raw {
	r := &raw{}
	r.WriteString(magic)
	return r.u32(version).u64(nTensors).u64(nKVs)
}

func writeTemp(t testing.TB, name string, data []byte) string {
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, data, 0o644))
	return p
}

// openErr opens bytes that must fail and checks the message is one line that
// starts with the path and mentions every fragment.
func openErr(t *testing.T, data []byte, fragments ...string) {
	t.Helper()
	p := writeTemp(t, "bad.gguf", data)
	f, err := Open(p)
	if err == nil {
		f.Close()
		t.Fatalf("opening %s succeeded, want an error mentioning %q", p, fragments)
	}
	msg := err.Error()
	require.True(t, strings.HasPrefix(msg, p+": "), "error %q does not start with the path", msg)
	require.NotContains(t, msg, "\n")
	for _, s := range fragments {
		require.Contains(t, msg, s)
	}
}
