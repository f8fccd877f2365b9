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

// Slice gives n zeroed values on a 2 MB boundary, with no room to grow
// into the rounding, for lengths under, at and over a huge page.
func TestSlice(t *testing.T) {
	for _, n := range []int{1, 1000, Size / 4, Size/4 + 1, 3*Size/4 + 77} {
		b := Slice[float32](n)
		if len(b) != n || cap(b) != n {
			t.Fatalf("n=%d: len %d cap %d", n, len(b), cap(b))
		}
		if runtime.GOOS == "linux" && uintptr(unsafe.Pointer(&b[0]))%Size != 0 {
			t.Fatalf("n=%d: start %p is not on a 2 MB boundary", n, &b[0])
		}
		for i, v := range b {
			if v != 0 {
				t.Fatalf("n=%d: value %d is %g, want 0", n, i, v)
			}
		}
		b[n-1] = 1
	}
}
