package gguf

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTruncated cuts a real file at many offsets: every cut must fail cleanly.
func TestTruncated(t *testing.T) {
	full, err := os.ReadFile(filepath.Join(modelsDir(t), "stories260K", "stories260K.gguf"))
	require.NoError(t, err)
	f, err := Open(filepath.Join(modelsDir(t), "stories260K", "stories260K.gguf"))
	require.NoError(t, err)
	dataStart := int(f.DataOffset)
	f.Close()
	path := filepath.Join(t.TempDir(), "cut.gguf")
	var cuts []int
	// Every byte of the fixed header and first entries, then a stride that is
	// prime so cuts land at all positions within strings and values.
	for n := 0; n < dataStart; n++ {
		if n < 1024 || n%13 == 0 || n > dataStart-64 {
			cuts = append(cuts, n)
		}
	}
	for n := dataStart; n < len(full); n += 9973 {
		cuts = append(cuts, n)
	}
	cuts = append(cuts, len(full)-1)
	for _, n := range cuts {
		require.NoError(t, os.WriteFile(path, full[:n], 0o644))
		f, err := Open(path)
		if err == nil {
			f.Close()
			t.Fatalf("cut at %d: opened without error", n)
		}
		msg := err.Error()
		require.True(t, strings.HasPrefix(msg, path+": "), "cut at %d: %q", n, msg)
		require.NotContains(t, msg, "\n")
		if n > 24 { // past the fixed header, the message must say which key or tensor
			require.Regexp(t, `metadata (key|entry|entries)|tensor`, msg, "cut at %d", n)
		}
		if n >= dataStart {
			require.Contains(t, msg, "runs past the end of the file")
		}
	}
}

func TestBadInput(t *testing.T) {
	tensor := func(typ uint32, dims []uint64, offset uint64, data int) []byte {
		r := header("GGUF", 3, 1, 0)
		r.str("t").u32(uint32(len(dims)))
		for _, d := range dims {
			r.u64(d)
		}
		r.u32(typ).u64(offset).pad(32)
		r.Write(make([]byte, data))
		return r.Bytes()
	}
	// The valid baseline opens, so each failure below is due to the one change.
	f, err := Open(writeTemp(t, "ok.gguf", tensor(0, []uint64{1024}, 0, 4096)))
	require.NoError(t, err)
	f.Close()

	openErr(t, tensor(0, []uint64{1024}, 0, 4000), `tensor "t": data [64, 4160) runs past the end of the file (4064 bytes)`)
	openErr(t, tensor(0, []uint64{1024}, 32, 4096), `tensor "t": data [96, 4192) runs past the end of the file`)
	openErr(t, tensor(99, []uint64{1024}, 0, 4096), `tensor "t": unknown dtype id 99`)
	openErr(t, tensor(18, []uint64{1024}, 0, 4096), `tensor "t": unknown dtype id 18 (llama.cpp's iq3_xxs`) // only PWRI maps 18
	openErr(t, tensor(20, []uint64{1024}, 0, 4096), `tensor "t": unknown dtype id 20 (llama.cpp's iq4_nl, which pinfer does not read)`)
	openErr(t, tensor(0, []uint64{1024}, 16, 4096), `tensor "t"`, "not a multiple of the alignment 32")
	openErr(t, tensor(8, []uint64{33}, 0, 4096), `tensor "t"`, "does not fill whole blocks")
	openErr(t, tensor(0, []uint64{1, 1, 1, 1, 1}, 0, 4096), `tensor "t"`, "dimensions")
	openErr(t, tensor(0, []uint64{1 << 40, 1 << 40}, 0, 4096), `tensor "t"`, "too many")
	openErr(t, tensor(0, []uint64{1024}, 1<<63, 4096), `tensor "t"`)

	openErr(t, header("GGUX", 3, 0, 0).Bytes(), `bad magic "GGUX"`)
	openErr(t, header("GGUF", 1, 0, 0).Bytes(), "unsupported GGUF version 1")
	openErr(t, header("GGUF", 3<<24, 0, 0).Bytes(), "a big-endian GGUF (version 3)") // its 3 read little-endian
	openErr(t, []byte("GG"), "truncated at byte 2")
	openErr(t, nil, "truncated at byte 0")
	missing := filepath.Join(t.TempDir(), "missing.gguf")
	_, err = Open(missing)
	require.ErrorContains(t, err, missing+": open: no such file")

	kv := func(key string, typ uint32) *raw { return header("GGUF", 3, 0, 1).str(key).u32(typ) }
	openErr(t, kv("a.b", uint32(Array)).u32(uint32(Uint32)).u64(1<<60).Bytes(), `metadata key "a.b"`, "1152921504606846976")
	openErr(t, kv("a.s", uint32(Array)).u32(uint32(String)).u64(1<<40).Bytes(), `metadata key "a.s"`)
	openErr(t, kv("a.s", uint32(String)).u64(1<<62).Bytes(), `metadata key "a.s"`, "string length")
	openErr(t, kv("a.t", 13).u32(0).Bytes(), `metadata key "a.t"`, "unknown value type 13")
	openErr(t, kv("a.e", uint32(Array)).u32(77).u64(1).Bytes(), `metadata key "a.e"`, "unknown value type 77")
	openErr(t, kv("general.alignment", uint32(Uint32)).u32(0).Bytes(), `metadata key "general.alignment"`)
	openErr(t, kv("general.alignment", uint32(String)).str("x").Bytes(), `metadata key "general.alignment"`, "want integer")

	deep := kv("a.deep", uint32(Array))
	for range 20 {
		deep.u32(uint32(Array)).u64(1)
	}
	openErr(t, deep.Bytes(), `metadata key "a.deep"`, "nested")

	dupKey := header("GGUF", 3, 0, 2).str("k").u32(uint32(Uint8))
	dupKey.WriteByte(1)
	dupKey.str("k").u32(uint32(Uint8)).WriteByte(2)
	openErr(t, dupKey.Bytes(), `metadata key "k": duplicate`)

	dupT := header("GGUF", 3, 2, 0)
	dupT.str("t").u32(1).u64(8).u32(0).u64(0)
	dupT.str("t").u32(1).u64(8).u32(0).u64(32).pad(32)
	dupT.Write(make([]byte, 64))
	openErr(t, dupT.Bytes(), `tensor "t": duplicate`)

	openErr(t, header("GGUF", 3, 1<<40, 0).Bytes(), "tensor infos")
	openErr(t, header("GGUF", 3, 0, 1<<40).Bytes(), "metadata entries")
	cut := header("GGUF", 3, 2, 0)
	cut.str("t").u32(1).u64(8).u32(0).u64(0).u64(100)
	cut.Write(make([]byte, 23))
	openErr(t, cut.Bytes(), "tensor info 1 of 2", "string length 100")
	openErr(t, header("GGUF", 3, 0, 0).Bytes()[:20], "truncated at byte 20")
}

func TestAccessorErrors(t *testing.T) {
	r := header("GGUF", 3, 0, 4)
	r.str("neg").u32(uint32(Int32)).u32(uint32(0xffffffff))
	r.str("big").u32(uint32(Uint64)).u64(1 << 63)
	r.str("ints").u32(uint32(Array)).u32(uint32(Int64)).u64(2).u64(5).u64(1 << 40)
	r.str("u16s").u32(uint32(Array)).u32(uint32(Uint16)).u64(2)
	r.Write([]byte{1, 0, 0xff, 0xff})
	p := writeTemp(t, "acc.gguf", r.Bytes())
	f, err := Open(p)
	require.NoError(t, err)
	defer f.Close()

	_, err = f.Uint("neg")
	require.EqualError(t, err, p+`: metadata key "neg": want a non-negative integer, got -1`)
	i, err := f.Int("neg")
	require.NoError(t, err)
	require.Equal(t, int64(-1), i)
	fl, err := f.Float("neg")
	require.NoError(t, err)
	require.Equal(t, -1.0, fl)
	_, err = f.Int("big")
	require.ErrorContains(t, err, `metadata key "big"`)
	_, err = f.Int32s("ints")
	require.ErrorContains(t, err, `metadata key "ints": element 1`)
	u16, err := f.Int32s("u16s")
	require.NoError(t, err)
	require.Equal(t, []int32{1, 65535}, u16)
	_, err = f.Bool("neg")
	require.EqualError(t, err, p+`: metadata key "neg": want bool, got int32`)
	_, err = f.Float32s("ints")
	require.EqualError(t, err, p+`: metadata key "ints": want array of float32, got array of int64`)
	require.Equal(t, "", f.Arch())
}
