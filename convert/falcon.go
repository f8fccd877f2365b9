package convert

import "fmt"

// readFalcon reads FalconConfig. Three attention layouts share one fused
// query_key_value: Falcon-7B's multi-query (n_head q heads, then one k and
// one v), the new decoder architecture of Falcon-40B (num_kv_heads groups of
// q heads followed by their k and v), and the original one (each head's q,
// k, v together). All are groups of n_head/n_head_kv q heads, a k and a v.
//
// The custom-code configs (model_type RefinedWebModel or RefinedWeb) use
// the old names n_embed, n_layer, n_head and n_head_kv, as FalconConfig
// still accepts; as transformers' convert_custom_code_checkpoint.py does,
// such a config has the new decoder architecture exactly when it gives
// n_head_kv.
func readFalcon(c *config, hp *hparams) error {
	names := map[string]string{}
	for _, n := range [][2]string{{"hidden_size", "n_embed"}, {"num_hidden_layers", "n_layer"},
		{"num_attention_heads", "n_head"}, {"num_kv_heads", "n_head_kv"}} {
		name, err := c.renamed(n[0], n[1])
		if err != nil {
			return err
		}
		names[n[0]] = name
	}
	err := c.ints(intField{names["hidden_size"], -1, &hp.nEmbd}, intField{names["num_hidden_layers"], -1, &hp.nLayer},
		intField{names["num_attention_heads"], -1, &hp.nHead}, intField{"vocab_size", -1, &hp.nVocab},
		intField{"max_position_embeddings", 2048, &hp.nCtx})
	if err != nil {
		return err
	}
	if hp.nEmbd%hp.nHead != 0 {
		return c.errf(names["hidden_size"], "%d is not a multiple of %s %d", hp.nEmbd, names["num_attention_heads"], hp.nHead)
	}
	hp.headDim = hp.nEmbd / hp.nHead
	if hp.nFF, err = c.positive("ffn_hidden_size", 4*hp.nEmbd); err != nil {
		return err
	}
	for _, off := range []string{"alibi", "bias"} {
		if on, err := c.boolean(off, false); err != nil {
			return err
		} else if on {
			return c.errf(off, "is true; llama.cpp's falcon layout (rotary, no linear biases) cannot hold it")
		}
	}
	newArch, err := c.boolean("new_decoder_architecture", false)
	if err != nil {
		return err
	}
	if _, rw := modelTypeAliases[hp.modelType]; rw {
		_, newArch = c.field(names["num_kv_heads"])
	}
	multiQuery, err := c.boolean("multi_query", true)
	if err != nil {
		return err
	}
	parallel, err := c.boolean("parallel_attn", true)
	if err != nil {
		return err
	}
	hp.falconNorms = 1
	switch {
	case newArch:
		if hp.nHeadKV, err = c.positive(names["num_kv_heads"], hp.nHead); err != nil {
			return err
		}
		if hp.falconNorms, err = c.positive("num_ln_in_parallel_attn", 2); err != nil {
			return err
		}
		if hp.falconNorms > 2 {
			return c.errf("num_ln_in_parallel_attn", "is %d, want 1 or 2", hp.falconNorms)
		}
	case !parallel:
		return c.errf("parallel_attn", "is false; llama.cpp's falcon layout runs attention and FFN in parallel")
	case multiQuery:
		hp.nHeadKV = 1
	default:
		hp.nHeadKV = hp.nHead
	}
	if hp.nHead%hp.nHeadKV != 0 {
		return c.errf(names["num_kv_heads"], "is %d, which does not divide %s %d", hp.nHeadKV, names["num_attention_heads"], hp.nHead)
	}
	if hp.eps, err = c.float("layer_norm_epsilon", 1e-5, false); err != nil {
		return err
	}
	if hp.tied, err = c.boolean("tie_word_embeddings", true); err != nil {
		return err
	}
	hp.act, err = c.str("activation", "gelu")
	return err
}

// renamed is the name config.json gives a field that older configs call
// old: name when present, else old; both present and different is refused.
func (c *config) renamed(name, old string) (string, error) {
	v, hasNew := c.field(name)
	o, hasOld := c.field(old)
	switch {
	case hasNew && hasOld && shown(v) != shown(o):
		return "", c.errf(old, "is %s but %s is %s; want one of them, or the same value", shown(o), name, shown(v))
	case !hasNew && hasOld:
		return old, nil
	}
	return name, nil
}

func falconMeta(hp *hparams) []keyValue {
	return []keyValue{
		{"falcon.context_length", u32(hp.nCtx)},
		{"falcon.tensor_data_layout", "jploski"}, // q heads, then k, then v
		{"falcon.embedding_length", u32(hp.nEmbd)},
		{"falcon.feed_forward_length", u32(hp.nFF)},
		{"falcon.block_count", u32(hp.nLayer)},
		{"falcon.attention.head_count", u32(hp.nHead)},
		{"falcon.attention.head_count_kv", u32(hp.nHeadKV)},
		{"falcon.attention.layer_norm_epsilon", float32(hp.eps)},
		{"falcon.rope.freq_base", float32(hp.ropeTheta)},
	}
}

// falconQKV maps the rows of llama.cpp's attn_qkv (all q heads, then the k
// heads, then the v heads) to the grouped rows of query_key_value.
func falconQKV(nHead, nKV, hd int) func(int) int {
	per := nHead / nKV // q heads per group; a group is per+2 heads
	return func(r int) int {
		h, j := r/hd, r%hd
		switch {
		case h < nHead:
			return ((h/per)*(per+2)+h%per)*hd + j
		case h < nHead+nKV:
			return ((h-nHead)*(per+2)+per)*hd + j
		default:
			return ((h-nHead-nKV)*(per+2)+per+1)*hd + j
		}
	}
}

func falconTensors(p *planner, hp *hparams) error {
	d, ff, hd := hp.nEmbd, hp.nFF, hp.headDim
	if err := p.add("transformer.word_embeddings.weight", "token_embd.weight", []int{hp.nVocab, d}, nil); err != nil {
		return err
	}
	// llama.cpp names Falcon-40B's ln_mlp attn_norm and ln_attn attn_norm_2.
	norms := [][2]string{{"input_layernorm", "attn_norm"}}
	if hp.falconNorms == 2 {
		norms = [][2]string{{"ln_mlp", "attn_norm"}, {"ln_attn", "attn_norm_2"}}
	}
	qkv := (hp.nHead + 2*hp.nHeadKV) * hd
	for i := 0; i < hp.nLayer; i++ {
		hf := fmt.Sprintf("transformer.h.%d.", i)
		blk := fmt.Sprintf("blk.%d.", i)
		for _, n := range norms {
			for _, part := range []string{".weight", ".bias"} {
				if err := p.add(hf+n[0]+part, blk+n[1]+part, []int{d}, nil); err != nil {
					return err
				}
			}
		}
		for _, m := range []struct {
			hf, gg string
			shape  []int
			rowMap func(int) int
		}{
			{"self_attention.query_key_value", "attn_qkv", []int{qkv, d}, falconQKV(hp.nHead, hp.nHeadKV, hd)},
			{"self_attention.dense", "attn_output", []int{d, d}, nil},
			{"mlp.dense_h_to_4h", "ffn_up", []int{ff, d}, nil},
			{"mlp.dense_4h_to_h", "ffn_down", []int{d, ff}, nil},
		} {
			if err := p.add(hf+m.hf+".weight", blk+m.gg+".weight", m.shape, m.rowMap); err != nil {
				return err
			}
		}
	}
	for _, part := range []string{".weight", ".bias"} {
		if err := p.add("transformer.ln_f"+part, "output_norm"+part, []int{d}, nil); err != nil {
			return err
		}
	}
	return p.output(hp, "lm_head.weight")
}
