package hugepage

import (
	"runtime"
	"testing"
	"unsafe"
)

func TestAlloc(t *testing.T) {
	const n = 3*Size + 12345
	for _, huge := range []bool{true, false} {
		b, free, err := Alloc[byte](n, huge)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) != n {
			t.Fatalf("len %d, want %d", len(b), n)
		}
		if runtime.GOOS == "linux" && uintptr(unsafe.Pointer(&b[0]))%Size != 0 {
			t.Fatalf("huge=%v: start %p is not on a 2 MB boundary", huge, &b[0])
		}
		for i := range b {
			if b[i] != 0 {
				t.Fatalf("byte %d is %d, want 0", i, b[i])
			}
			b[i] = byte(i)
		}
		if last := n - 1; b[last] != byte(last) {
			t.Fatal("last byte not kept")
		}
		if frac, ok := Share(b); ok {
			t.Logf("huge=%v: %.0f%% in 2 MB pages", huge, 100*frac)
			if !huge && frac > 0 {
				t.Errorf("huge=false: %.0f%% in 2 MB pages, want none", 100*frac)
			}
		}
		free()
	}
}
