//go:build cuda

package cuda_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pinfer/pinfer/engine"
	"github.com/pinfer/pinfer/graph"
	"github.com/pinfer/pinfer/hybrid"
	"github.com/pinfer/pinfer/internal/fixtures"
	"github.com/pinfer/pinfer/ops"
	"github.com/pinfer/pinfer/ops/cuda"
	"github.com/stretchr/testify/require"
)

// The whole step on the GPU keeps its KV caches there; a saved session
// copies them out in the CPU's layout and a restored one copies them in.
// A state saved on the device goes on, on the CPU, to llama.cpp's logits
// of stories260K step by step, and a CPU's state on the device the same;
// a restored device session saves the file it read, byte for byte.
func TestDeviceStateCrossesToCPU(t *testing.T) {
	steps := fixtures.StoriesTrace(t, 40)

	m, err := engine.Load(fixtures.Path(t, "stories260K", "stories260K.gguf"), "")
	require.NoError(t, err)
	defer m.Close()
	e, err := hybrid.NewDeviceExec(m.Prog, hybrid.DeviceOptions{Predictor: "dense"})
	require.NoError(t, err)
	defer func() { require.NoError(t, e.Close()) }()
	cpu, dev := m.Prog, e.Program()

	for _, kv := range []ops.DType{ops.F32, ops.F16} {
		t.Run(kv.String(), func(t *testing.T) {
			tol := map[ops.DType]float64{ops.F32: 1e-3, ops.F16: 0.02}[kv]
			session := func(p *graph.Program) *graph.Session {
				s := p.NewSession(64, nil)
				require.NoError(t, s.SetKVType(kv))
				return s
			}
			run := func(s *graph.Session, from, to int, what string) {
				for i := from; i < to; i++ {
					logits, err := s.Forward([]int{steps[i].InputToken}, false)
					require.NoError(t, err)
					for k, ref := range steps[i].Top5 {
						require.InDelta(t, ref[1], logits.Data[int(ref[0])], tol, "%s: step %d rank %d", what, i, k)
					}
				}
			}
			save := func(s *graph.Session) []byte {
				var buf bytes.Buffer
				_, err := s.SaveState(&buf)
				require.NoError(t, err)
				return buf.Bytes()
			}
			load := func(s *graph.Session, file []byte) {
				n, _, err := s.LoadState(bytes.NewReader(file))
				require.NoError(t, err)
				require.Equal(t, 20, n)
			}

			d := session(dev)
			run(d, 0, 20, "device")
			c := session(cpu)
			load(c, save(d))
			run(c, 20, 40, "CPU from the device's state")

			c = session(cpu)
			run(c, 0, 20, "CPU")
			file := save(c)
			d = session(dev)
			load(d, file)
			require.Equal(t, file, save(d), "a restored device session saves what it read")
			run(d, 20, 40, "device from the CPU's state")
		})
	}
}

// A model without sparse FFNs under a budget of half its size: the planner
// needs no profile, puts whole blocks' attention and FFN matmuls on the
// GPU, and stories260K still gives llama.cpp's top-5 logits step by step.
func TestHybridDenseModel(t *testing.T) {
	steps := fixtures.StoriesTrace(t, 60)
	src := fixtures.Path(t, "stories260K", "stories260K.gguf")
	path := filepath.Join(t.TempDir(), "stories.gguf") // the index is cached beside it
	copyFile(t, src, path)
	m, err := engine.Load(path, "")
	require.NoError(t, err)
	defer m.Close()
	plan, err := hybrid.Plan(m, hybrid.Options{Budget: fileSize(t, path) / 2, Reset: true, Log: os.Stderr})
	require.NoError(t, err)
	ffn := 0
	for _, d := range plan.Dense {
		if strings.HasSuffix(d, ".ffn") {
			ffn++
		}
	}
	require.Positive(t, ffn, "some FFNs on the GPU: %v", plan.Dense)
	r := onGPU(t, m, plan)
	require.NotEmpty(t, r.Dense)
	sess := m.NewSession(64, nil)
	for i, st := range steps[:60] {
		logits, err := sess.Forward([]int{st.InputToken}, false)
		require.NoError(t, err)
		for k, ref := range st.Top5 {
			require.InDelta(t, ref[1], logits.Data[int(ref[0])], 1e-3, "step %d rank %d", i, k)
		}
	}
	require.NoError(t, ops.Device.(*cuda.Backend).Err())
}
