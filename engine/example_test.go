package engine

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/pinfer/pinfer/convert"
	"github.com/pinfer/pinfer/internal/fixtures"
	"github.com/pinfer/pinfer/ops"
	"github.com/pinfer/pinfer/sample"
	"github.com/stretchr/testify/require"
)

// copyFixture copies an arch fixture into dir with its config edited, and
// returns the new model directory and config.
func copyFixture(t *testing.T, name, dir string, edit func(map[string]any)) (string, map[string]any) {
	src := fixtures.Path(t, "arch", name)
	hf := filepath.Join(dir, name)
	require.NoError(t, os.Mkdir(hf, 0o755))
	var cfg map[string]any
	raw, err := os.ReadFile(filepath.Join(src, "config.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &cfg))
	edit(cfg)
	raw, err = json.Marshal(cfg)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(hf, "config.json"), raw, 0o644))
	for _, f := range []string{"model.safetensors", "tokenizer.model"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(hf, f), b, 0o644))
	}
	return hf, cfg
}

// readmeGraph is the worked example's TOML block in models/README.md.
func readmeGraph(t *testing.T) string {
	b, err := os.ReadFile(filepath.Join("..", "models", "README.md"))
	require.NoError(t, err)
	_, rest, ok := strings.Cut(string(b), "## Worked example")
	require.True(t, ok, "models/README.md has no worked example")
	_, rest, ok = strings.Cut(rest, "```toml\n")
	require.True(t, ok)
	block, _, ok := strings.Cut(rest, "```")
	require.True(t, ok)
	return block
}

// The README's GELU LLaMA, a family that exists only as TOML, runs a LLaMA
// checkpoint whose config says gelu_pytorch_tanh, and agrees with a float64
// forward pass computed here from the checkpoint's own tensors.
func TestWorkedExampleGELULlama(t *testing.T) {
	src := fixtures.Path(t, "arch", "llama-relu")
	dir := t.TempDir()
	hf, cfg := copyFixture(t, "llama-relu", dir, func(c map[string]any) { c["hidden_act"] = "gelu_pytorch_tanh" })
	model := filepath.Join(dir, "llama-gelu.gguf")
	require.NoError(t, convert.Convert(hf, model, convert.Options{Type: ops.F32, Logf: t.Logf}))
	graph := filepath.Join(dir, "llama-gelu.toml")
	require.NoError(t, os.WriteFile(graph, []byte(readmeGraph(t)), 0o644))

	m, err := Load(model, graph)
	require.NoError(t, err)
	defer m.Close()
	require.Equal(t, "llama-gelu", m.Spec.Name)
	act, _ := m.File.String("pinfer.ffn_activation")
	require.Equal(t, "gelu_pytorch_tanh", act)

	ref := newRefLlama(t, hf, cfg)
	var prompts archRef
	raw, err := os.ReadFile(filepath.Join(src, "reference.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &prompts))
	pool := ops.NewPool(2)
	defer pool.Close()
	for k, p := range prompts.Prompts {
		logits, err := m.NewSession(64, pool).Forward(p.IDs, true)
		require.NoError(t, err)
		want := ref.forward(p.IDs)
		for pos := range p.IDs {
			for i, w := range want[pos] {
				require.InDelta(t, w, float64(logits.Row(pos)[i]), 1e-3, "prompt %d position %d id %d", k, pos, i)
			}
		}
		res, err := m.GenerateIDs(p.IDs, Options{N: 8, Pool: pool, Sample: sample.Params{Temp: 0}})
		require.NoError(t, err)
		seq := append([]int(nil), p.IDs...)
		for step, id := range res.Tokens {
			last := ref.forward(seq)[len(seq)-1]
			best, second := argmax2(last)
			if last[best]-last[second] > 1e-4 { // a closer tie may go either way in f32
				require.Equal(t, best, id, "prompt %d step %d", k, step)
			}
			seq = append(seq, id)
		}
	}
}

func argmax2(x []float64) (best, second int) {
	best, second = 0, 1
	if x[1] > x[0] {
		best, second = 1, 0
	}
	for i := 2; i < len(x); i++ {
		switch {
		case x[i] > x[best]:
			best, second = i, best
		case x[i] > x[second]:
			second = i
		}
	}
	return best, second
}

// refLlama is a LLaMA forward pass in float64 over the Hugging Face tensors
// (rotate-half RoPE, as transformers computes it), with a GELU (tanh) gate.
type refLlama struct {
	w                         map[string][]float64
	d, nLayer, nHead, nKV, hd int
	eps, theta                float64
	embd, lmHead              string
	act                       func(g, u float64) float64 // the FFN's act(gate)·up; default GELU
}

func newRefLlama(t *testing.T, dir string, cfg map[string]any) *refLlama {
	num := func(k string) int { return int(cfg[k].(float64)) }
	r := &refLlama{w: readSafetensors64(t, filepath.Join(dir, "model.safetensors")),
		d: num("hidden_size"), nLayer: num("num_hidden_layers"), nHead: num("num_attention_heads"),
		nKV: num("num_key_value_heads"), hd: num("head_dim"), eps: cfg["rms_norm_eps"].(float64),
		theta: cfg["rope_parameters"].(map[string]any)["rope_theta"].(float64),
		embd:  "model.embed_tokens.weight", lmHead: "lm_head.weight"}
	return r
}

func (r *refLlama) mat(name string, x []float64) []float64 {
	w := r.w[name]
	out := make([]float64, len(w)/len(x))
	for i := range out {
		for j, v := range x {
			out[i] += w[i*len(x)+j] * v
		}
	}
	return out
}

func (r *refLlama) rms(name string, x []float64) []float64 {
	var ss float64
	for _, v := range x {
		ss += v * v
	}
	s := 1 / math.Sqrt(ss/float64(len(x))+r.eps)
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = v * s * r.w[name][i]
	}
	return out
}

func (r *refLlama) rope(x []float64, heads, pos int) {
	half := r.hd / 2
	for h := 0; h < heads; h++ {
		for i := 0; i < half; i++ {
			a := float64(pos) * math.Pow(r.theta, -float64(2*i)/float64(r.hd))
			x0, x1 := x[h*r.hd+i], x[h*r.hd+i+half]
			x[h*r.hd+i] = x0*math.Cos(a) - x1*math.Sin(a)
			x[h*r.hd+i+half] = x1*math.Cos(a) + x0*math.Sin(a)
		}
	}
}

// forward returns the logits of every position of ids.
func (r *refLlama) forward(ids []int) [][]float64 {
	T := len(ids)
	xs := make([][]float64, T)
	for t, id := range ids {
		xs[t] = append([]float64(nil), r.w[r.embd][id*r.d:(id+1)*r.d]...)
	}
	for l := 0; l < r.nLayer; l++ {
		p := func(s string) string { return "model.layers." + itoa(l) + "." + s + ".weight" }
		qs, ks, vs := make([][]float64, T), make([][]float64, T), make([][]float64, T)
		for t := range xs {
			h := r.rms(p("input_layernorm"), xs[t])
			qs[t], ks[t], vs[t] = r.mat(p("self_attn.q_proj"), h), r.mat(p("self_attn.k_proj"), h), r.mat(p("self_attn.v_proj"), h)
			r.rope(qs[t], r.nHead, t)
			r.rope(ks[t], r.nKV, t)
		}
		for t := range xs {
			att := make([]float64, r.nHead*r.hd)
			for h := 0; h < r.nHead; h++ {
				kvh := h / (r.nHead / r.nKV)
				s := make([]float64, t+1)
				mx := math.Inf(-1)
				for j := range s {
					for i := 0; i < r.hd; i++ {
						s[j] += qs[t][h*r.hd+i] * ks[j][kvh*r.hd+i]
					}
					s[j] /= math.Sqrt(float64(r.hd))
					mx = math.Max(mx, s[j])
				}
				var z float64
				for j := range s {
					s[j] = math.Exp(s[j] - mx)
					z += s[j]
				}
				for j := range s {
					for i := 0; i < r.hd; i++ {
						att[h*r.hd+i] += s[j] / z * vs[j][kvh*r.hd+i]
					}
				}
			}
			for i, v := range r.mat(p("self_attn.o_proj"), att) {
				xs[t][i] += v
			}
			h := r.rms(p("post_attention_layernorm"), xs[t])
			g, u := r.mat(p("mlp.gate_proj"), h), r.mat(p("mlp.up_proj"), h)
			for i, v := range g {
				if r.act != nil {
					g[i] = r.act(v, u[i])
					continue
				}
				g[i] = 0.5 * v * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(v+0.044715*v*v*v))) * u[i]
			}
			for i, v := range r.mat(p("mlp.down_proj"), g) {
				xs[t][i] += v
			}
		}
	}
	out := make([][]float64, T)
	for t := range xs {
		out[t] = r.mat(r.lmHead, r.rms("model.norm.weight", xs[t]))
	}
	return out
}

func itoa(i int) string { return strconv.Itoa(i) }

// readSafetensors64 decodes every F16 tensor of a safetensors file to
// float64 straight from the format: an 8-byte header length, a JSON header,
// then the data.
func readSafetensors64(t *testing.T, path string) map[string][]float64 {
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	n := binary.LittleEndian.Uint64(b)
	var hdr map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(b[8:8+n], &hdr))
	out := map[string][]float64{}
	for name, raw := range hdr {
		if name == "__metadata__" {
			continue
		}
		var e struct {
			DType string `json:"dtype"`
			Off   [2]int `json:"data_offsets"`
		}
		require.NoError(t, json.Unmarshal(raw, &e))
		require.Equal(t, "F16", e.DType, name)
		data := b[8+int(n)+e.Off[0] : 8+int(n)+e.Off[1]]
		v := make([]float64, len(data)/2)
		for i := range v {
			h := binary.LittleEndian.Uint16(data[2*i:])
			sign, exp, man := 1.0, int(h>>10&0x1f), float64(h&0x3ff)
			if h&0x8000 != 0 {
				sign = -1
			}
			if exp == 0 {
				v[i] = sign * math.Ldexp(man, -24)
			} else {
				v[i] = sign * math.Ldexp(1+man/1024, exp-15)
			}
		}
		out[name] = v
	}
	return out
}

// ProSparse's FATReLU and Bamboo's dReLU run through the ReLU graph with the
// activation (and FATReLU's threshold) read from the converted file; their
// logits match a float64 forward pass of the checkpoint, dense and with the
// oracle predictor.
func TestFATReLUAndDReLU(t *testing.T) {
	const thr = 0.02
	cases := []struct {
		act  string
		edit func(map[string]any)
		f    func(g, u float64) float64
	}{
		{"fatrelu", func(c map[string]any) { c["hidden_act"], c["hidden_act_param"] = "fatrelu", thr },
			func(g, u float64) float64 {
				if g <= thr {
					return 0
				}
				return g * u
			}},
		{"drelu", func(c map[string]any) { c["hidden_act"] = "drelu" },
			func(g, u float64) float64 { return math.Max(g, 0) * math.Max(u, 0) }},
	}
	for _, c := range cases {
		t.Run(c.act, func(t *testing.T) {
			dir := t.TempDir()
			hf, cfg := copyFixture(t, "llama-relu", dir, c.edit)
			model := filepath.Join(dir, "m.gguf")
			require.NoError(t, convert.Convert(hf, model, convert.Options{Type: ops.F32, Logf: t.Logf}))
			m, err := Load(model, "")
			require.NoError(t, err)
			defer m.Close()
			require.Equal(t, "relu-llama", m.Spec.Name)
			ref := newRefLlama(t, hf, cfg)
			ref.act = c.f
			ids := []int{1, 17, 230, 5, 99, 42}
			want := ref.forward(ids)
			oracle, err := m.Predictor("oracle")
			require.NoError(t, err)
			for _, pred := range []string{"dense", "oracle"} {
				s := m.NewSession(64, nil)
				if pred == "oracle" {
					s.SetPredictor(oracle)
				}
				logits, err := s.Forward(ids, true)
				require.NoError(t, err)
				for pos := range ids {
					for i, w := range want[pos] {
						require.InDelta(t, w, float64(logits.Row(pos)[i]), 1e-3, "%s %s position %d id %d", c.act, pred, pos, i)
					}
				}
			}
		})
	}
}
