package convert

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"
)

// hparams are the config.json values the GGUF file needs.
type hparams struct {
	fam                     *family
	modelType               string
	nEmbd, nFF, nLayer      int
	nHead, nHeadKV, headDim int
	nCtx, nVocab            int
	eps, ropeTheta          float64
	tied                    bool
	act                     string
	actParam                float64 // FATReLU's threshold (hidden_act_param)
	bos, eos                int     // -1: not given, take the tokenizer's
	pad, unk                int     // -1: none, or not given
	slidingWindow           int     // 0: none
	nExpert, nExpertUsed    int     // Mixtral; 0: a dense FFN
	falconNorms             int     // Falcon: 2 when attention and FFN have their own LayerNorm
}

// config reads config.json keeping each raw field, so a field that is
// missing, null or of the wrong kind is reported by name.
type config struct {
	path string
	raw  map[string]json.RawMessage
}

func (c *config) errf(field, format string, args ...any) error {
	return fmt.Errorf("%s: %s %s", c.path, field, fmt.Sprintf(format, args...))
}

// shown is a raw value as an error quotes it: on one line, and cut short,
// since a wrong value may be a large nested object.
func shown(v json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, v) != nil {
		return "not JSON"
	}
	s := b.String()
	if len(s) > 60 {
		cut := 57
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "..."
	}
	return s
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
		return 0, c.errf(name, "is %s, want a number", shown(v))
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
	return 0, c.errf(name, "is %s, want a token id", shown(v))
}

// padID reads pad_token_id. Unlike bos and eos, a negative id is common
// (old LLaMA configs say -1) and means no padding token.
func (c *config) padID() (int, error) {
	if v, ok := c.field("pad_token_id"); ok {
		var f float64
		if json.Unmarshal(v, &f) == nil && f < 0 {
			return -1, nil
		}
	}
	return c.tokenID("pad_token_id")
}

func (c *config) str(name, def string) (string, error) {
	v, ok := c.field(name)
	if !ok {
		return def, nil
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", c.errf(name, "is %s, want a string", shown(v))
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
		return false, c.errf(name, "is %s, want true or false", shown(v))
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
	if hp.bos, err = c.tokenID("bos_token_id"); err != nil {
		return nil, err
	}
	if hp.eos, err = c.tokenID("eos_token_id"); err != nil {
		return nil, err
	}
	if hp.pad, err = c.padID(); err != nil {
		return nil, err
	}
	if hp.unk, err = c.tokenID("unk_token_id"); err != nil {
		return nil, err
	}
	if err := hp.fam.read(c, &hp); err != nil {
		return nil, err
	}
	return &hp, nil
}

// intField names a config.json integer, its default (< 0: required) and
// where it goes.
type intField struct {
	name string
	def  int
	dst  *int
}

// ints reads positive integers.
func (c *config) ints(fields ...intField) error {
	var err error
	for _, f := range fields {
		if *f.dst, err = c.positive(f.name, f.def); err != nil {
			return err
		}
	}
	return nil
}

// maxPositions are transformers' max_position_embeddings defaults, used
// when config.json leaves it out: LlamaConfig's 2048, Mistral's and
// Mixtral's 4096*32.
var maxPositions = map[string]int{"llama": 2048, "mistral": 4096 * 32, "mixtral": 4096 * 32}

// readLlama reads LLaMA, Mistral and Mixtral configs, which share LLaMA's
// fields; Mixtral adds its experts.
func readLlama(c *config, hp *hparams) error {
	err := c.ints(intField{"hidden_size", -1, &hp.nEmbd}, intField{"intermediate_size", -1, &hp.nFF},
		intField{"num_hidden_layers", -1, &hp.nLayer}, intField{"num_attention_heads", -1, &hp.nHead},
		intField{"max_position_embeddings", maxPositions[hp.modelType], &hp.nCtx}, intField{"vocab_size", -1, &hp.nVocab})
	if err != nil {
		return err
	}
	if hp.nHeadKV, err = c.positive("num_key_value_heads", hp.nHead); err != nil {
		return err
	}
	if hp.nHead%hp.nHeadKV != 0 {
		return c.errf("num_key_value_heads", "is %d, which does not divide num_attention_heads %d", hp.nHeadKV, hp.nHead)
	}
	if _, ok := c.field("head_dim"); !ok && hp.nEmbd%hp.nHead != 0 {
		return c.errf("head_dim", "is missing and hidden_size %d is not a multiple of num_attention_heads %d", hp.nEmbd, hp.nHead)
	}
	if hp.headDim, err = c.positive("head_dim", hp.nEmbd/max(hp.nHead, 1)); err != nil {
		return err
	}
	if hp.headDim%2 != 0 {
		return c.errf("head_dim", "is %d, want an even number for RoPE", hp.headDim)
	}
	// The defaults are those of transformers' LlamaConfig.
	if hp.eps, err = c.float("rms_norm_eps", 1e-6, false); err != nil {
		return err
	}
	if hp.eps <= 0 {
		return c.errf("rms_norm_eps", "is %v, want a positive number", hp.eps)
	}
	if hp.tied, err = c.boolean("tie_word_embeddings", false); err != nil {
		return err
	}
	if hp.act, err = c.str("hidden_act", "silu"); err != nil {
		return err
	}
	if hp.act == "" {
		return c.errf("hidden_act", "is empty")
	}
	if hp.act == "fatrelu" {
		if hp.actParam, err = c.float("hidden_act_param", 0, false); err != nil {
			return err
		}
	}
	for _, b := range []string{"attention_bias", "mlp_bias"} {
		if on, err := c.boolean(b, false); err != nil {
			return err
		} else if on {
			return c.errf(b, "is true; biased LLaMA layers are not supported")
		}
	}
	if hp.modelType == "mixtral" {
		if hp.nExpert, err = c.positive("num_local_experts", 8); err != nil {
			return err
		}
		if hp.nExpertUsed, err = c.positive("num_experts_per_tok", 2); err != nil {
			return err
		}
		if hp.nExpertUsed > hp.nExpert {
			return c.errf("num_experts_per_tok", "is %d, more than num_local_experts %d", hp.nExpertUsed, hp.nExpert)
		}
	}
	if hp.modelType != "llama" {
		// MistralConfig's default window is 4096 (Mixtral's none); null turns it off.
		def := 4096
		if hp.modelType == "mixtral" {
			def = 0
		}
		if v, ok := c.raw["sliding_window"]; ok && string(v) == "null" {
			hp.slidingWindow = 0
		} else if _, ok := c.raw["sliding_window"]; ok || def > 0 {
			if hp.slidingWindow, err = c.positive("sliding_window", def); err != nil {
				return err
			}
		}
	}
	return nil
}

// modelTypeAliases are old model_type names of a family: Falcon's custom
// code checkpoints (RWForCausalLM) say RefinedWebModel (7B) or RefinedWeb
// (40B), which transformers' convert_custom_code_checkpoint.py renames falcon.
var modelTypeAliases = map[string]string{"RefinedWebModel": "falcon", "RefinedWeb": "falcon"}

// arch finds the family from model_type, or from the architectures list
// when model_type is absent, and checks that the two agree.
func (c *config) arch(hp *hparams) error {
	var err error
	if hp.modelType, err = c.str("model_type", ""); err != nil {
		return err
	}
	var archs []string
	if v, ok := c.field("architectures"); ok {
		if err := json.Unmarshal(v, &archs); err != nil {
			return c.errf("architectures", "is %s, want a list of class names", shown(v))
		}
	}
	if hp.modelType == "" {
		for mt, f := range families {
			if len(archs) > 0 && slices.Contains(f.classes, archs[0]) {
				hp.modelType = mt
			}
		}
		if hp.modelType == "" {
			return c.errf("model_type", "is missing")
		}
	}
	f, ok := families[hp.modelType]
	if alias, isAlias := modelTypeAliases[hp.modelType]; isAlias {
		f, ok = families[alias], true
	}
	if !ok {
		return c.errf("model_type", "%q is not supported (supported: %s)", hp.modelType, strings.Join(familyNames(), ", "))
	}
	hp.fam = f
	for _, a := range archs {
		if !slices.Contains(f.classes, a) {
			return c.errf("architectures", "%q is not supported for model_type %q (want %s)", a, hp.modelType, strings.Join(f.classes, " or "))
		}
	}
	return nil
}

// rope reads rope_theta from the top level (older transformers) or from
// rope_parameters (newer), refusing scaled variants this file cannot express.
func (c *config) rope(hp *hparams) error {
	hp.ropeTheta = 10000
	if hp.modelType == "mixtral" {
		hp.ropeTheta = 1e6 // MixtralConfig's default; the others' is 10000
	}
	if v, ok := c.field("rope_scaling"); ok {
		var rs map[string]any
		if json.Unmarshal(v, &rs) != nil {
			return c.errf("rope_scaling", "is %s, want an object", shown(v))
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
			return c.errf("rope_parameters", "is %s, want an object: %v", shown(v), err)
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
