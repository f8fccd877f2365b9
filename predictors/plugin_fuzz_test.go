package predictors

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// FuzzPlugin: a predictor script is user input too. Any source either
// fails to load with one line that starts with its path, or loads and
// answers Predict with valid neuron ids (or nil, running the layer dense),
// without taking the host down.
func FuzzPlugin(f *testing.F) {
	seeds, _ := filepath.Glob("../plugins/*.go")
	for _, p := range seeds {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
	f.Add("package p\nimport \"pinfer/host\"\nfunc Predict(l host.Layer, in host.Input) []int32 { return host.TopK(host.MLPScores(l, in), 2) }\n")
	f.Add("package p\nimport \"pinfer/host\"\nfunc Predict(l host.Layer, in host.Input) []int32 { var a []int32; return a[1:3] }\n")
	f.Add("package p\nimport \"pinfer/host\"\nfunc Predict(l host.Layer, in host.Input) []int32 { return []int32{5, -1, 9} }\n")
	path := filepath.Join(f.TempDir(), "fuzz.go")
	f.Fuzz(func(t *testing.T, src string) {
		l, in := handLayer(t)
		if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		opt := PluginOptions{Budget: 20 * time.Millisecond, InitBudget: 200 * time.Millisecond, Log: func(string) {}}
		p, err := LoadPluginWith(path, []*Layer{l}, opt)
		if err != nil {
			if msg := err.Error(); !strings.HasPrefix(msg, path) || strings.ContainsAny(msg, "\n\r") {
				t.Fatalf("error is not one line naming the file: %q", msg)
			}
			return
		}
		ids := p.Predict(l, in, nil)
		for i, id := range ids {
			if id < 0 || int(id) >= l.NFF || (i > 0 && id <= ids[i-1]) {
				t.Fatalf("Predict gave %v", ids)
			}
		}
	})
}
