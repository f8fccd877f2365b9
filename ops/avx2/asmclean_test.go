package avx2

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestAsmLeavesAVXClean reads the package's assembly: a function that
// touches Y or Z registers runs VZEROUPPER before it returns and before any
// SSE (non-VEX) instruction on an X register. SSE code that meets dirty
// upper halves, the Go code after the call included, pays for the AVX state
// on every instruction on some cores: a probe kernel with four such moves a
// step ran at half speed on the Zen 3 host (ops/avx2/NOTES.md).
func TestAsmLeavesAVXClean(t *testing.T) {
	wide := regexp.MustCompile(`\b[YZ]([0-9]|[12][0-9]|3[01])\b`)
	sse := regexp.MustCompile(`^\s*([A-UW-Z][A-Z0-9]*)\s+.*\bX([0-9]|1[0-5])\b`)
	ret := regexp.MustCompile(`^\s*RET\b`)
	files, _ := filepath.Glob("*.s")
	hs, _ := filepath.Glob("*.h")
	files = append(files, hs...)
	if len(files) == 0 {
		t.Fatal("no assembly found")
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dirty, fn := false, f
		for i, line := range strings.Split(string(b), "\n") {
			code, _, _ := strings.Cut(line, "//")
			code = strings.TrimSuffix(strings.TrimSpace(code), `\`)
			switch {
			case strings.HasPrefix(code, "TEXT"):
				dirty, fn = false, code
			case strings.Contains(code, "VZEROUPPER"):
				dirty = false
			case wide.MatchString(code):
				dirty = true
			case dirty && sse.MatchString(code):
				t.Errorf("%s:%d (%s): SSE instruction with the upper halves dirty: %s", f, i+1, fn, code)
			case dirty && ret.MatchString(code):
				t.Errorf("%s:%d (%s): RET with the upper halves dirty", f, i+1, fn)
			}
		}
	}
}
