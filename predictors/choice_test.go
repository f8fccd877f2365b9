package predictors

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/pinfer/pinfer/ops"
	"github.com/stretchr/testify/require"
)

// The executor hands a row's first Predict a nil dst and reads a nil answer
// as every neuron, so an empty choice must come back empty and non-nil
// whatever dst was, and a plugin's nil must stay nil.
func TestPluginEmptyAnswerIsNone(t *testing.T) {
	l, in := handLayer(t)
	src := `//go:build pinfer_plugin
package p
import "pinfer/host"
func Predict(l host.Layer, in host.Input) []int32 {
	if l.Index == 5 { return nil }
	return []int32{}
}
`
	dense, _ := handLayer(t)
	dense.Index = 5
	p, err := LoadPlugin(writePlugin(t, "empty.go", src), []*Layer{l, dense})
	require.NoError(t, err)
	for _, dst := range [][]int32{nil, make([]int32, 0, 8), {}} {
		got := p.Predict(l, in, dst)
		require.NotNil(t, got, "dst %#v", dst)
		require.Empty(t, got)
		require.Nil(t, p.Predict(dense, in, dst))
	}
	require.False(t, p.(*plugin).states[l].failed)
}

// The built-ins choose no neuron as an empty non-nil slice too: mlp when
// no score clears its cut, oracle when nothing fires, static when no
// neuron's rate reaches MinRate.
func TestBuiltinsEmptyChoiceIsNone(t *testing.T) {
	l, _ := handLayer(t)
	zero := Input{Resid: make([]float32, 4), Normed: make([]float32, 4)} // every score and gate is 0
	l.Rates = []float32{0.01, 0, 0, 0, 0.04, 0}
	static, err := NewStatic([]*Layer{l})
	require.NoError(t, err)
	for _, p := range []Predictor{&MLP{}, &Oracle{}, static} {
		got := p.Predict(l, zero, nil)
		require.NotNil(t, got, p.Name())
		require.Empty(t, got, p.Name())
	}
	pool := ops.NewPool(1)
	defer pool.Close()
	rows := (&MLP{}).PredictRows(l, Rows{Resid: make([]float32, 8), Normed: make([]float32, 8), T: 2, Pool: pool}, nil)
	require.Len(t, rows, 2)
	for tt, r := range rows {
		require.NotNil(t, r, "token %d", tt)
		require.Empty(t, r, "token %d", tt)
	}
}

// The experts of a mixture share a block index; the static predictor keeps
// each expert's own hot set, as the profile records it (one entry per
// layer and expert).
func TestStaticPerExpert(t *testing.T) {
	path := filepath.Join(t.TempDir(), "moe.json")
	require.NoError(t, os.WriteFile(path, []byte(`{"tokens": 10, "layers": [
		{"layer": 0, "expert": 0, "frequency": [0, 0, 0, 0]},
		{"layer": 0, "expert": 1, "frequency": [0.9, 0.5, 0.2, 0.1]},
		{"layer": 0, "expert": 2, "frequency": [0, 0.01, 0, 0.02]},
		{"layer": 1, "expert": 0, "frequency": [0, 0, 0.3, 0]},
		{"layer": 1, "expert": 1, "frequency": [0.06, 0, 0, 0]}
	]}`), 0o644))
	s, err := ReadStats(path)
	require.NoError(t, err)
	var layers []*Layer
	for _, k := range [][2]int{{0, 0}, {0, 1}, {0, 2}, {1, 0}, {1, 1}} {
		layers = append(layers, &Layer{Index: k[0], Expert: k[1], NFF: 4})
	}
	require.NoError(t, s.Attach(path, layers))
	p, err := NewStatic(layers)
	require.NoError(t, err)
	want := [][]int32{{}, {0, 1, 2, 3}, {}, {2}, {0}} // rates >= 0.05
	for i, l := range layers {
		require.Equal(t, want[i], p.Predict(l, Input{}, nil), "layer %d expert %d", l.Index, l.Expert)
	}
	// A layer the predictor was not made for runs dense.
	require.Nil(t, p.Predict(&Layer{Index: 0, Expert: 3, NFF: 4}, Input{}, nil))
}

// A script sees which expert of a block it is asked about, at Init and in
// Predict, so it can keep state per expert.
func TestHostLayerExpert(t *testing.T) {
	var layers []*Layer
	for e := range 3 {
		l, _ := handLayer(t)
		l.Expert = e
		layers = append(layers, l)
	}
	_, in := handLayer(t)
	src := `package p
import "pinfer/host"
var seen = map[[2]int]bool{}
var calls = map[[2]int]int{}
func Init(ls []host.Layer) { for _, l := range ls { seen[[2]int{l.Index, l.Expert}] = true } }
func Predict(l host.Layer, in host.Input) []int32 {
	k := [2]int{l.Index, l.Expert}
	if len(seen) != 3 || !seen[k] { panic("Init did not see each expert") }
	calls[k]++
	return []int32{int32(l.Expert), int32(calls[k])}
}
`
	p, err := LoadPlugin(writePlugin(t, "experts.go", src), layers)
	require.NoError(t, err)
	for round := int32(1); round <= 2; round++ {
		for e, l := range layers {
			want := []int32{int32(e), round}
			if int32(e) > round {
				want = []int32{round, int32(e)}
			} else if int32(e) == round {
				want = []int32{round}
			}
			require.Equal(t, want, p.Predict(l, in, nil), "expert %d round %d", e, round)
		}
	}
}

// slices and maps are refused at the import, by name, rather than failing
// inside yaegi's interpretation of their generic source.
func TestPluginRefusesSlicesAndMaps(t *testing.T) {
	l, _ := handLayer(t)
	for imp, use := range map[string]string{
		"slices": "slices.Sort(s)",
		"maps":   "_ = maps.Clone(map[int]int{})",
	} {
		src := "package p\n\nimport (\n\t\"pinfer/host\"\n\t\"" + imp + "\"\n)\n\nfunc Predict(l host.Layer, in host.Input) []int32 {\n\ts := []int32{2, 1}\n\t" + use + "\n\treturn s\n}\n"
		path := writePlugin(t, imp+".go", src)
		_, err := LoadPlugin(path, []*Layer{l})
		require.ErrorContains(t, err, path+":5: import \""+imp+"\" is not allowed in a plugin", imp)
		require.NotContains(t, err.Error(), " "+imp+",", "the allowed list names it")
	}
}
