package engine

import (
	"fmt"
	"strings"
)

// Context is the context size that nctx asks for: itself, or for 0 the
// model's trained context, at most 4096.
func (m *Model) Context(nctx int) int {
	if nctx > 0 {
		return nctx
	}
	return min(max(m.ContextLength(), 1), 4096)
}

// CheckContext refuses a context that seqs sequences' KV caches could not
// fit in this machine's memory and swap. The caches are made at the first
// forward pass, where Go can only die of an allocation that large.
func (m *Model) CheckContext(nctx, seqs int) error {
	need := m.Prog.KVBytes(nctx, m.KVType) * int64(max(seqs, 1))
	have := memoryBytes()
	if have > 0 && need > have {
		each := ""
		if seqs > 1 {
			each = fmt.Sprintf(" for %d sequences", seqs)
		}
		return fmt.Errorf("a context of %d positions needs %.1f GB of KV cache%s (%v), more than this machine's %.1f GB of memory and swap: lower the context size", nctx, float64(need)/1e9, each, m.KVType, float64(have)/1e9)
	}
	return nil
}

// PastTraining says, when nctx positions go past the context the model was
// trained on, so as llama.cpp warns: the text may fall apart past it.
func (m *Model) PastTraining(nctx int) string {
	if n := m.ContextLength(); n > 0 && nctx > n {
		return fmt.Sprintf("warning: the model was trained on %d positions; a context of %d goes past them", n, nctx)
	}
	return ""
}

// checkRoPEScaling refuses a file that stretches RoPE (linear, YaRN: llama.cpp's
// rope.scaling.* and the older rope.scale_linear): no graph's rope op
// scales positions, and running it unscaled gives wrong text without a word.
func (m *Model) checkRoPEScaling() error {
	arch := m.File.Arch()
	key := arch + ".rope.scaling.type"
	switch t, _ := m.File.String(key); {
	case strings.EqualFold(t, "none"):
		return nil // whatever factor it names, switched off
	case t != "":
		return fmt.Errorf("%s: metadata key %q = %q: RoPE scaling is not supported", m.Path, key, t)
	}
	for _, k := range []string{arch + ".rope.scaling.factor", arch + ".rope.scale_linear"} {
		if v, err := m.File.Float(k); err == nil && v != 0 && v != 1 {
			return fmt.Errorf("%s: metadata key %q = %g: RoPE scaling is not supported", m.Path, k, v)
		}
	}
	return nil
}
