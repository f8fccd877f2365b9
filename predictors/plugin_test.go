package predictors

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pinfer/pinfer/ops"
	"github.com/stretchr/testify/require"
)

func f32Matrix(t *testing.T, rows, cols int, v ...float32) *ops.Matrix {
	t.Helper()
	require.Len(t, v, rows*cols)
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	m, err := ops.NewMatrix(ops.F32, rows, cols, b)
	require.NoError(t, err)
	return m
}

// A layer small enough to check by hand: fc1 keeps resid's first two
// components, fc2 mixes them, so for resid (3, 1, 5, 7) the scores are
// relu(3, 1) · fc2 = (3, 1, 6, -1, 4, -3). The gate fires for neurons 1, 3.
func handLayer(t *testing.T) (*Layer, Input) {
	l := &Layer{Index: 4, NEmbd: 4, NFF: 6, Act: "relu",
		FC1: f32Matrix(t, 2, 4, 1, 0, 0, 0, 0, 1, 0, 0),
		FC2: f32Matrix(t, 6, 2, 1, 0, 0, 1, 2, 0, 0, -1, 1, 1, -1, 0),
		Gate: f32Matrix(t, 6, 4,
			-1, 0, 0, 0,
			0, 1, 0, 0,
			0, 0, -1, 0,
			0, 0, 0, 1,
			-1, -1, 0, 0,
			0, 0, 0, 0),
	}
	in := Input{Resid: []float32{3, 1, 5, 7}, Normed: []float32{3, 1, 5, 7}}
	return l, in
}

func writePlugin(t *testing.T, name, src string) string {
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, []byte(src), 0o644))
	return p
}

type logBook struct {
	mu    sync.Mutex
	lines []string
}

func (b *logBook) log(s string) { b.mu.Lock(); b.lines = append(b.lines, s); b.mu.Unlock() }

func (b *logBook) all() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.lines...)
}

func TestTopKPluginHandChecked(t *testing.T) {
	l, in := handLayer(t)
	p, err := LoadPlugin("../plugins/topk.go", []*Layer{l})
	require.NoError(t, err)
	require.Equal(t, "../plugins/topk.go", p.Name())
	// Without a profile K = ceil(0.25·6) = 2: scores 6 and 4.
	require.Equal(t, []int32{2, 4}, p.Predict(l, in, nil))
	// With rates summing to 2.9, K = ceil(1.25·2.9) = 4: 6, 4, 3, 1.
	l.Rates = []float32{0.5, 0.5, 0.5, 0.5, 0.5, 0.4}
	p, err = LoadPlugin("../plugins/topk.go", []*Layer{l})
	require.NoError(t, err)
	require.Equal(t, []int32{0, 1, 2, 4}, p.Predict(l, in, nil))
	// dst is appended to.
	require.Equal(t, []int32{9, 0, 1, 2, 4}, p.Predict(l, in, []int32{9}))
}

func TestHostAPIHandChecked(t *testing.T) {
	l, in := handLayer(t)
	src := `package probe
import "pinfer/host"
var seen []int
func Init(ls []host.Layer) { for _, l := range ls { seen = append(seen, l.Index) } }
func Predict(l host.Layer, in host.Input) []int32 {
	if len(seen) != 1 || seen[0] != 4 || l.NFF != 6 || l.NEmbd != 4 || l.Rank() != 2 || l.Act() != "relu" {
		panic("layer facts")
	}
	g := host.GateScores(l, in) // (-3, 1, -5, 7, -4, 0)
	if g[3] != 7 || g[2] != -5 { panic("gate") }
	at := host.GateAt(l, in, []int32{3, 0})
	if at[0] != 7 || at[1] != -3 { panic("gate at") }
	f := host.Fired(l, in)
	if len(f) != 2 || f[0] != 1 || f[1] != 3 { panic("fired") }
	s := host.MLPScores(l, in)
	a := host.Above(s, 2) // 0, 2, 4
	if host.Recall(a, f) != 0 { panic("recall") }
	u := host.Union(a, f)
	if len(u) != 5 || host.Recall(u, f) != 1 { panic("union") }
	b := l.Scratch("bias", 6)
	host.AddAt(b, []int32{3}, 10) // lifts neuron 3 from -1 to 9
	host.Add(s, b)
	if host.Dot(b, b) != 100 || host.Sum(b) != 10 { panic("vec") }
	if l.Scratch("bias", 6)[3] != 10 { panic("scratch kept") }
	r := in.Resid()
	r[0] = 100 // a copy: the executor's vector is untouched
	return host.TopK(s, 2)
}
`
	p, err := LoadPlugin(writePlugin(t, "probe.go", src), []*Layer{l})
	require.NoError(t, err)
	require.Equal(t, []int32{2, 3}, p.Predict(l, in, nil))
	require.Equal(t, float32(3), in.Resid[0])
	require.False(t, p.(*plugin).states[l].failed)
}

func TestTopKSelection(t *testing.T) {
	// Ties go to the lower id; NaN counts lowest; k beyond n keeps all.
	s := []float32{1, 5, 5, float32(math.NaN()), 5, -2, 3}
	require.Equal(t, []int32{1, 2}, TopK(nil, s, 2))
	require.Equal(t, []int32{1, 2, 4, 6}, TopK(nil, s, 4))
	require.Equal(t, []int32{0, 1, 2, 4, 5, 6}, TopK(nil, s, 6))
	require.Equal(t, []int32{0, 1, 2, 3, 4, 5, 6}, TopK(nil, s, 9))
	require.Empty(t, TopK(nil, s, 0))
	// Against a sort on many random draws.
	rng := uint32(7)
	for trial := 0; trial < 200; trial++ {
		n := 1 + trial%97
		v := make([]float32, n)
		for i := range v {
			rng = rng*1664525 + 1013904223
			v[i] = float32(rng>>24%13) - 6 // many ties
		}
		k := (trial * 7) % (n + 1)
		got := TopK(nil, v, k)
		require.Len(t, got, k)
		// Every kept score is >= every dropped one, and a tie kept has a lower id.
		kept := map[int32]bool{}
		for _, id := range got {
			kept[id] = true
		}
		for i := range v {
			for _, id := range got {
				if !kept[int32(i)] {
					require.True(t, v[id] > v[i] || (v[id] == v[i] && id < int32(i)), "trial %d", trial)
				}
			}
		}
	}
}

func TestPluginRefusesImports(t *testing.T) {
	l, _ := handLayer(t)
	for _, imp := range []string{"os/exec", "unsafe", "syscall", "os", "reflect", "runtime", "net/http", "path/filepath", "io/ioutil", "github.com/x/y"} {
		src := "package bad\n\nimport (\n\t\"math\"\n\t_ \"" + imp + "\"\n)\n\nvar _ = math.Pi\n"
		path := writePlugin(t, "bad.go", src)
		_, err := LoadPlugin(path, []*Layer{l})
		require.Error(t, err, imp)
		msg := err.Error()
		require.NotContains(t, msg, "\n")
		require.Contains(t, msg, path+":5: import \""+imp+"\" is not allowed", imp)
	}
	for src, want := range map[string]string{
		"package bad\nfunc Predict() { go func(){}() }\n":                      ":2: a plugin may not start goroutines",
		"package bad\nvar c chan int\n":                                        ":2: a plugin may not use channels",
		"package main\nfunc main() {}\n":                                       ":2: a plugin has no main function",
		"package bad\nimport \"pinfer/host\"\nfunc Predict(l host.Layer) {}\n": "Predict is func(host.Layer), want func(l host.Layer, in host.Input) []int32",
		"package bad\nfunc Other() {}\n":                                       "no func Predict",
	} {
		_, err := LoadPlugin(writePlugin(t, "bad.go", src), []*Layer{l})
		require.ErrorContains(t, err, want)
	}
}

func TestPluginCompileErrorNamesLine(t *testing.T) {
	l, _ := handLayer(t)
	src := "package bad\n\nimport \"pinfer/host\"\n\nfunc Predict(l host.Layer, in host.Input) []int32 {\n\treturn undefinedThing(l)\n}\n"
	path := writePlugin(t, "bad.go", src)
	_, err := LoadPlugin(path, []*Layer{l})
	require.Error(t, err)
	require.True(t, strings.HasPrefix(err.Error(), path+":6:"), err.Error())
	require.Contains(t, err.Error(), "undefinedThing")
	require.NotContains(t, err.Error(), "\n")
	// A syntax error too.
	path = writePlugin(t, "syntax.go", "package bad\n\nfunc Predict( {\n")
	_, err = LoadPlugin(path, []*Layer{l})
	require.Error(t, err)
	require.True(t, strings.HasPrefix(err.Error(), path+":3:"), err.Error())
}

// Each misbehaviour is reported once, naming the file and layer, and that
// layer alone goes dense; the others keep their sparse answers.
func TestPluginFailuresFallBackToDense(t *testing.T) {
	cases := map[string]struct{ body, want string }{
		"panic":    {`panic("boom")`, "panic: boom (in p.Predict)"},
		"index":    {`var a []int32; return a[1:3]`, "panic: "},
		"range":    {`return []int32{0, 6}`, "neuron 6, out of range [0,6)"},
		"negative": {`return []int32{-1}`, "neuron -1, out of range"},
		"loop":     {`x := 0; for { x++ }; return nil`, "overran its time budget of 20ms"},
		"spin":     {`for {}`, "overran its time budget of 20ms"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			la, in := handLayer(t)
			lb, _ := handLayer(t)
			lb.Index = 5
			src := `package p
import "pinfer/host"
var calls int
func Predict(l host.Layer, in host.Input) []int32 {
	calls++
	if l.Index == 5 {
		` + c.body + `
	}
	return []int32{3, 1, 1} // sorted and deduplicated by the host
}
`
			var book logBook
			path := writePlugin(t, name+".go", src)
			p, err := LoadPluginWith(path, []*Layer{la, lb}, PluginOptions{Budget: 20 * time.Millisecond, Log: book.log})
			require.NoError(t, err)
			for range 3 {
				require.Equal(t, []int32{1, 3}, p.Predict(la, in, nil))
				require.Nil(t, p.Predict(lb, in, nil))
			}
			lines := book.all()
			require.Len(t, lines, 1)
			require.Contains(t, lines[0], "plugin "+path+": layer 5: ")
			require.Contains(t, lines[0], c.want)
			require.Contains(t, lines[0], "the FFN runs dense from now on")
		})
	}
}

// In a mixture the failure names the expert too: its layer's other experts
// go on sparse.
func TestPluginFailureNamesExpert(t *testing.T) {
	la, in := handLayer(t)
	lb, _ := handLayer(t)
	la.Index, lb.Index, lb.Expert = 2, 2, 1
	src := `package p
import "pinfer/host"
func Predict(l host.Layer, in host.Input) []int32 {
	if l.Expert == 1 {
		panic("boom")
	}
	return []int32{1}
}
`
	var book logBook
	path := writePlugin(t, "moe.go", src)
	p, err := LoadPluginWith(path, []*Layer{la, lb}, PluginOptions{Log: book.log})
	require.NoError(t, err)
	for range 2 {
		require.Equal(t, []int32{1}, p.Predict(la, in, nil))
		require.Nil(t, p.Predict(lb, in, nil))
	}
	lines := book.all()
	require.Len(t, lines, 1)
	require.Contains(t, lines[0], "plugin "+path+": layer 2 expert 1: panic: boom")
}

func TestPluginPackageMainAndUnsorted(t *testing.T) {
	l, in := handLayer(t)
	src := `package main
import ("pinfer/host"; "sort")
func Predict(l host.Layer, in host.Input) []int32 {
	ids := []int32{5, 0, 2, 0}
	sort.Slice(ids, func(i, j int) bool { return ids[i] > ids[j] })
	return ids
}
`
	p, err := LoadPlugin(writePlugin(t, "m.go", src), []*Layer{l})
	require.NoError(t, err)
	require.Equal(t, []int32{0, 2, 5}, p.Predict(l, in, nil))
}

// The cost of one call through the interpreter against the same work in Go.
func BenchmarkPluginCall(b *testing.B) {
	const n, d, r = 1024, 256, 64
	rng := uint32(1)
	rnd := func(k int) []float32 {
		v := make([]float32, k)
		for i := range v {
			rng = rng*1664525 + 1013904223
			v[i] = float32(int32(rng)) / (1 << 31)
		}
		return v
	}
	t := &testing.T{}
	l := &Layer{Index: 0, NEmbd: d, NFF: n, Act: "relu", FC1: f32Matrix(t, r, d, rnd(r*d)...), FC2: f32Matrix(t, n, r, rnd(n*r)...)}
	in := Input{Resid: rnd(d), Normed: rnd(d)}
	p, err := LoadPlugin("../plugins/topk.go", []*Layer{l})
	require.NoError(b, err)
	mlp := &MLP{}
	var dst []int32
	b.Run("plugin", func(b *testing.B) {
		for b.Loop() {
			dst = p.Predict(l, in, dst[:0])
		}
	})
	b.Run("go", func(b *testing.B) {
		for b.Loop() {
			mlp.Predict(l, in, nil)
			dst = TopK(dst[:0], mlp.s, n/4)
		}
	})
}
