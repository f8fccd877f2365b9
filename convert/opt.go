package convert

import "fmt"

// readOPT reads OPTConfig (max_position_embeddings defaults to its 2048):
// the pre-norm layout of OPT-125m and up (every
// size but 350m), with biases everywhere and learned positions.
func readOPT(c *config, hp *hparams) error {
	err := c.ints(intField{"hidden_size", -1, &hp.nEmbd}, intField{"ffn_dim", -1, &hp.nFF},
		intField{"num_hidden_layers", -1, &hp.nLayer}, intField{"num_attention_heads", -1, &hp.nHead},
		intField{"max_position_embeddings", 2048, &hp.nCtx}, intField{"vocab_size", -1, &hp.nVocab})
	if err != nil {
		return err
	}
	if hp.nEmbd%hp.nHead != 0 {
		return c.errf("hidden_size", "%d is not a multiple of num_attention_heads %d", hp.nEmbd, hp.nHead)
	}
	hp.headDim, hp.nHeadKV = hp.nEmbd/hp.nHead, hp.nHead
	for _, want := range []struct {
		name      string
		def, need bool
	}{
		{"do_layer_norm_before", true, true}, {"enable_bias", true, true},
		{"layer_norm_elementwise_affine", true, true}, {"_remove_final_layer_norm", false, false},
	} {
		if v, err := c.boolean(want.name, want.def); err != nil {
			return err
		} else if v != want.need {
			return c.errf(want.name, "is %v; only OPT's pre-norm layout with biased layers and a final LayerNorm is supported", v)
		}
	}
	if p, err := c.positive("word_embed_proj_dim", hp.nEmbd); err != nil {
		return err
	} else if p != hp.nEmbd {
		return c.errf("word_embed_proj_dim", "is %d, not hidden_size %d; OPT's project_in/project_out are not supported", p, hp.nEmbd)
	}
	if hp.act, err = c.str("activation_function", "relu"); err != nil {
		return err
	}
	if hp.act != "relu" {
		return c.errf("activation_function", "is %q; the OPT graph runs relu only", hp.act)
	}
	hp.eps = 1e-5 // OPT's LayerNorms use PyTorch's default
	hp.tied, err = c.boolean("tie_word_embeddings", true)
	return err
}

// optMeta follows PowerInfer's OPT converter, plus the epsilon.
func optMeta(hp *hparams) []keyValue {
	return []keyValue{
		{"opt.context_length", u32(hp.nCtx)},
		{"opt.embedding_length", u32(hp.nEmbd)},
		{"opt.block_count", u32(hp.nLayer)},
		{"opt.feed_forward_length", u32(hp.nFF)},
		{"opt.attention.head_count", u32(hp.nHead)},
		{"opt.attention.layer_norm_epsilon", float32(hp.eps)},
	}
}

// optTensors uses PowerInfer's names. The position table keeps OPT's two
// leading rows: position p reads row p+2.
func optTensors(p *planner, hp *hparams) error {
	d, ff := hp.nEmbd, hp.nFF
	pre := "model.decoder."
	if !p.st.Has(pre+"embed_tokens.weight") && p.st.Has("decoder.embed_tokens.weight") {
		pre = "decoder." // checkpoints of the bare OPTModel
	}
	if err := p.add(pre+"embed_tokens.weight", "token_embd.weight", []int{hp.nVocab, d}, nil); err != nil {
		return err
	}
	if err := p.add(pre+"embed_positions.weight", "position_embd.weight", []int{hp.nCtx + 2, d}, nil); err != nil {
		return err
	}
	type m struct {
		hf, gg string
		shape  []int
	}
	linear := func(hf, gg string, out, in int) []m {
		return []m{{hf + ".weight", gg + ".weight", []int{out, in}}, {hf + ".bias", gg + ".bias", []int{out}}}
	}
	norm := func(hf, gg string) []m {
		return []m{{hf + ".weight", gg + ".weight", []int{d}}, {hf + ".bias", gg + ".bias", []int{d}}}
	}
	for i := 0; i < hp.nLayer; i++ {
		hf := fmt.Sprintf("%slayers.%d.", pre, i)
		blk := fmt.Sprintf("blk.%d.", i)
		var list []m
		list = append(list, norm("self_attn_layer_norm", "attn_norm")...)
		list = append(list, linear("self_attn.q_proj", "attn_q", d, d)...)
		list = append(list, linear("self_attn.k_proj", "attn_k", d, d)...)
		list = append(list, linear("self_attn.v_proj", "attn_v", d, d)...)
		list = append(list, linear("self_attn.out_proj", "attn_output", d, d)...)
		list = append(list, norm("final_layer_norm", "ffn_norm")...)
		list = append(list, linear("fc1", "ffn_up", ff, d)...)
		list = append(list, linear("fc2", "ffn_down", d, ff)...)
		for _, x := range list {
			if err := p.add(hf+x.hf, blk+x.gg, x.shape, nil); err != nil {
				return err
			}
		}
	}
	for _, x := range norm(pre+"final_layer_norm", "output_norm") {
		if err := p.add(x.hf, x.gg, x.shape, nil); err != nil {
			return err
		}
	}
	return p.output(hp, "lm_head.weight")
}
