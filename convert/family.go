package convert

import (
	"fmt"
	"sort"
)

// family is one model_type: how to read its config.json, the GGUF metadata
// it gets, and where each of its tensors goes.
type family struct {
	arch    string   // general.architecture
	classes []string // config.json architectures entries meaning this layout
	read    func(c *config, hp *hparams) error
	meta    func(hp *hparams) []keyValue
	tensors func(p *planner, hp *hparams) error
}

// Mistral and Mixtral are llama.cpp's llama architecture: same names, plus
// a window (pinfer's key) or experts.
var families = map[string]*family{
	"llama":   {"llama", []string{"LlamaForCausalLM"}, readLlama, llamaMeta, llamaTensors},
	"mistral": {"llama", []string{"MistralForCausalLM"}, readLlama, llamaMeta, llamaTensors},
	"mixtral": {"llama", []string{"MixtralForCausalLM"}, readLlama, llamaMeta, llamaTensors},
	"falcon":  {"falcon", []string{"FalconForCausalLM", "RWForCausalLM"}, readFalcon, falconMeta, falconTensors},
	"opt":     {"opt", []string{"OPTForCausalLM"}, readOPT, optMeta, optTensors},
}

func familyNames() []string {
	var n []string
	for k := range families {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}

func u32(n int) uint32 { return uint32(n) }

func llamaMeta(hp *hparams) []keyValue {
	kv := []keyValue{
		{"llama.context_length", u32(hp.nCtx)},
		{"llama.embedding_length", u32(hp.nEmbd)},
		{"llama.block_count", u32(hp.nLayer)},
		{"llama.feed_forward_length", u32(hp.nFF)},
		{"llama.attention.head_count", u32(hp.nHead)},
		{"llama.attention.head_count_kv", u32(hp.nHeadKV)},
		{"llama.rope.dimension_count", u32(hp.headDim)},
		{"llama.rope.freq_base", float32(hp.ropeTheta)},
		{"llama.attention.layer_norm_rms_epsilon", float32(hp.eps)},
		{"llama.vocab_size", u32(hp.nVocab)},
	}
	if hp.headDim*hp.nHead != hp.nEmbd {
		// llama.cpp assumes n_embd/n_head unless these say otherwise.
		kv = append(kv, keyValue{"llama.attention.key_length", u32(hp.headDim)},
			keyValue{"llama.attention.value_length", u32(hp.headDim)})
	}
	if hp.nExpert > 0 {
		kv = append(kv, keyValue{"llama.expert_count", u32(hp.nExpert)},
			keyValue{"llama.expert_used_count", u32(hp.nExpertUsed)})
	}
	if hp.slidingWindow > 0 {
		// llama.cpp's llama architecture has no window; pinfer applies it.
		kv = append(kv, keyValue{"pinfer.attention.sliding_window", u32(hp.slidingWindow)})
	}
	return kv
}

func llamaTensors(p *planner, hp *hparams) error {
	d, q, kv := hp.nEmbd, hp.nHead*hp.headDim, hp.nHeadKV*hp.headDim
	if err := p.add("model.embed_tokens.weight", "token_embd.weight", []int{hp.nVocab, d}, nil); err != nil {
		return err
	}
	for i := 0; i < hp.nLayer; i++ {
		hf := fmt.Sprintf("model.layers.%d.", i)
		blk := fmt.Sprintf("blk.%d.", i)
		type m struct {
			hf, gg string
			shape  []int
			rowMap func(int) int
		}
		list := []m{
			{"input_layernorm", "attn_norm", []int{d}, nil},
			{"self_attn.q_proj", "attn_q", []int{q, d}, permuteHeads(q, hp.nHead)},
			{"self_attn.k_proj", "attn_k", []int{kv, d}, permuteHeads(kv, hp.nHeadKV)},
			{"self_attn.v_proj", "attn_v", []int{kv, d}, nil},
			{"self_attn.o_proj", "attn_output", []int{d, q}, nil},
			{"post_attention_layernorm", "ffn_norm", []int{d}, nil},
		}
		if hp.nExpert == 0 {
			list = append(list, m{"mlp.gate_proj", "ffn_gate", []int{hp.nFF, d}, nil},
				m{"mlp.up_proj", "ffn_up", []int{hp.nFF, d}, nil},
				m{"mlp.down_proj", "ffn_down", []int{d, hp.nFF}, nil})
		} else {
			list = append(list, m{"block_sparse_moe.gate", "ffn_gate_inp", []int{hp.nExpert, d}, nil})
		}
		for _, m := range list {
			if err := p.add(hf+m.hf+".weight", blk+m.gg+".weight", m.shape, m.rowMap); err != nil {
				return err
			}
		}
		if err := mixtralExperts(p, hp, hf, blk); err != nil {
			return err
		}
	}
	if err := p.add("model.norm.weight", "output_norm.weight", []int{d}, nil); err != nil {
		return err
	}
	return p.output(hp, "lm_head.weight")
}

// mixtralExperts stacks experts.N.w1 (gate), w3 (up) and w2 (down) into
// llama.cpp's 3-D ffn_{gate,up,down}_exps.
func mixtralExperts(p *planner, hp *hparams, hf, blk string) error {
	for _, e := range []struct {
		w, gg string
		shape []int
	}{{"w1", "ffn_gate_exps", []int{hp.nFF, hp.nEmbd}}, {"w3", "ffn_up_exps", []int{hp.nFF, hp.nEmbd}}, {"w2", "ffn_down_exps", []int{hp.nEmbd, hp.nFF}}} {
		var names []string
		for x := 0; x < hp.nExpert; x++ {
			names = append(names, fmt.Sprintf("%sblock_sparse_moe.experts.%d.%s.weight", hf, x, e.w))
		}
		if len(names) == 0 {
			return nil
		}
		if err := p.stack(names, blk+e.gg+".weight", e.shape); err != nil {
			return err
		}
	}
	return nil
}
