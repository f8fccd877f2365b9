package convert

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
)

// hparams are the config.json values the GGUF file needs.
type hparams struct {
	modelType               string
	nEmbd, nFF, nLayer      int
	nHead, nHeadKV, headDim int
	nCtx, nVocab            int
	eps, ropeTheta          float64
	tied                    bool
	act                     string
	bos, eos                int // -1: not given, take the tokenizer's
	slidingWindow           int // 0: none
}

// supported maps model_type to the architectures entries meaning the same
// layout; mistral checkpoints use LLaMA's tensor names exactly.
var supported = map[string]string{"llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM"}

// config reads config.json keeping each raw field, so a field that is
// missing, null or of the wrong kind is reported by name.
type config struct {
	path string
	raw  map[string]json.RawMessage
}

func (c *config) errf(field, format string, args ...any) error {
	return fmt.Errorf("%s: %s %s", c.path, field, fmt.Sprintf(format, args...))
}

// field returns the raw value, treating JSON null as absent.
func (c *config) field(name string) (json.RawMessage, bool) {
	v, ok := c.raw[name]
	if !ok || string(v) == "null" {
		return nil, false
	}
	return v, true
}

func (c *config) float(name string, def float64, required bool) (float64, error) {
	v, ok := c.field(name)
	if !ok {
		if required {
			return 0, c.errf(name, "is missing")
		}
		return def, nil
	}
	var f float64
	if err := json.Unmarshal(v, &f); err != nil {
		return 0, c.errf(name, "is %s, want a number", v)
	}
	return f, nil
}

// positive reads a required (def < 0) or defaulted positive integer.
func (c *config) positive(name string, def int) (int, error) {
	f, err := c.float(name, float64(def), def < 0)
	if err != nil {
		return 0, err
	}
	if f != math.Trunc(f) || f < 1 || f > math.MaxInt32 {
		return 0, c.errf(name, "is %v, want a positive integer", f)
	}
	return int(f), nil
}

// tokenID reads an optional id that may be a list (the first id is used).
func (c *config) tokenID(name string) (int, error) {
	v, ok := c.field(name)
	if !ok {
		return -1, nil
	}
	var id int
	if json.Unmarshal(v, &id) == nil && id >= 0 {
		return id, nil
	}
	var ids []int
	if json.Unmarshal(v, &ids) == nil && len(ids) > 0 && ids[0] >= 0 {
		return ids[0], nil
	}
	return 0, c.errf(name, "is %s, want a token id", v)
}

func (c *config) str(name, def string) (string, error) {
	v, ok := c.field(name)
	if !ok {
		return def, nil
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", c.errf(name, "is %s, want a string", v)
	}
	return s, nil
}

func (c *config) boolean(name string, def bool) (bool, error) {
	v, ok := c.field(name)
	if !ok {
		return def, nil
	}
	var b bool
	if err := json.Unmarshal(v, &b); err != nil {
		return false, c.errf(name, "is %s, want true or false", v)
	}
	return b, nil
}

func readConfig(dir string) (*hparams, error) {
	path := filepath.Join(dir, "config.json")
	data, err := os.ReadFile(path)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, fmt.Errorf("%s: no such file (want a Hugging Face model directory)", path)
		}
		return nil, err
	}
	c := &config{path: path}
	if err := json.Unmarshal(data, &c.raw); err != nil {
		return nil, fmt.Errorf("%s: not a JSON object: %v", path, err)
	}
	var hp hparams
	if err := c.arch(&hp); err != nil {
		return nil, err
	}
	if err := c.rope(&hp); err != nil {
		return nil, err
	}
	for _, p := range []struct {
		name string
		dst  *int
	}{
		{"hidden_size", &hp.nEmbd}, {"intermediate_size", &hp.nFF},
		{"num_hidden_layers", &hp.nLayer}, {"num_attention_heads", &hp.nHead},
		{"max_position_embeddings", &hp.nCtx}, {"vocab_size", &hp.nVocab},
	} {
		if *p.dst, err = c.positive(p.name, -1); err != nil {
			return nil, err
		}
	}
	if hp.nHeadKV, err = c.positive("num_key_value_heads", hp.nHead); err != nil {
		return nil, err
	}
	if hp.nHead%hp.nHeadKV != 0 {
		return nil, c.errf("num_key_value_heads", "is %d, which does not divide num_attention_heads %d", hp.nHeadKV, hp.nHead)
	}
	if _, ok := c.field("head_dim"); !ok && hp.nEmbd%hp.nHead != 0 {
		return nil, c.errf("head_dim", "is missing and hidden_size %d is not a multiple of num_attention_heads %d", hp.nEmbd, hp.nHead)
	}
	if hp.headDim, err = c.positive("head_dim", hp.nEmbd/max(hp.nHead, 1)); err != nil {
		return nil, err
	}
	if hp.headDim%2 != 0 {
		return nil, c.errf("head_dim", "is %d, want an even number for RoPE", hp.headDim)
	}
	// The defaults are those of transformers' LlamaConfig.
	if hp.eps, err = c.float("rms_norm_eps", 1e-6, false); err != nil {
		return nil, err
	}
	if hp.eps <= 0 {
		return nil, c.errf("rms_norm_eps", "is %v, want a positive number", hp.eps)
	}
	if hp.tied, err = c.boolean("tie_word_embeddings", false); err != nil {
		return nil, err
	}
	if hp.act, err = c.str("hidden_act", "silu"); err != nil {
		return nil, err
	}
	if hp.act == "" {
		return nil, c.errf("hidden_act", "is empty")
	}
	if hp.bos, err = c.tokenID("bos_token_id"); err != nil {
		return nil, err
	}
	if hp.eos, err = c.tokenID("eos_token_id"); err != nil {
		return nil, err
	}
	for _, b := range []string{"attention_bias", "mlp_bias"} {
		if on, err := c.boolean(b, false); err != nil {
			return nil, err
		} else if on {
			return nil, c.errf(b, "is true; biased LLaMA layers are not supported")
		}
	}
	if hp.modelType == "mistral" {
		// MistralConfig's default window is 4096; null turns it off.
		hp.slidingWindow = 4096
		if v, ok := c.raw["sliding_window"]; ok && string(v) == "null" {
			hp.slidingWindow = 0
		} else if hp.slidingWindow, err = c.positive("sliding_window", 4096); err != nil {
			return nil, err
		}
	}
	return &hp, nil
}

// arch accepts model_type llama or mistral, and an architectures list (when
// given) naming the matching causal-LM class.
func (c *config) arch(hp *hparams) error {
	var err error
	if hp.modelType, err = c.str("model_type", ""); err != nil {
		return err
	}
	var archs []string
	if v, ok := c.field("architectures"); ok {
		if err := json.Unmarshal(v, &archs); err != nil {
			return c.errf("architectures", "is %s, want a list of class names", v)
		}
	}
	if hp.modelType == "" {
		for mt, cls := range supported {
			if len(archs) > 0 && archs[0] == cls {
				hp.modelType = mt
			}
		}
		if hp.modelType == "" {
			return c.errf("model_type", "is missing")
		}
	}
	cls, ok := supported[hp.modelType]
	if !ok {
		return c.errf("model_type", "%q is not supported (supported: llama, mistral)", hp.modelType)
	}
	for _, a := range archs {
		if a != cls {
			return c.errf("architectures", "%q is not supported for model_type %q (want %s)", a, hp.modelType, cls)
		}
	}
	return nil
}

// rope reads rope_theta from the top level (older transformers) or from
// rope_parameters (newer), refusing scaled variants this file cannot express.
func (c *config) rope(hp *hparams) error {
	hp.ropeTheta = 10000
	if v, ok := c.field("rope_scaling"); ok {
		var rs map[string]any
		if json.Unmarshal(v, &rs) != nil {
			return c.errf("rope_scaling", "is %s, want an object", v)
		}
		t, _ := rs["rope_type"].(string)
		if t == "" {
			t, _ = rs["type"].(string)
		}
		if t != "" && t != "default" {
			return c.errf("rope_scaling", "type %q is not supported (only unscaled RoPE)", t)
		}
	}
	if v, ok := c.field("rope_parameters"); ok {
		var rp struct {
			RopeType  string   `json:"rope_type"`
			RopeTheta *float64 `json:"rope_theta"`
		}
		if err := json.Unmarshal(v, &rp); err != nil {
			return c.errf("rope_parameters", "is %s, want an object: %v", v, err)
		}
		if rp.RopeType != "" && rp.RopeType != "default" {
			return c.errf("rope_parameters.rope_type", "%q is not supported (only unscaled RoPE)", rp.RopeType)
		}
		if rp.RopeTheta != nil {
			hp.ropeTheta = *rp.RopeTheta
		}
	}
	var err error
	if hp.ropeTheta, err = c.float("rope_theta", hp.ropeTheta, false); err != nil {
		return err
	}
	if hp.ropeTheta <= 0 {
		return c.errf("rope_theta", "is %v, want a positive number", hp.ropeTheta)
	}
	return nil
}
