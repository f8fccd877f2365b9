package graph

import (
	"fmt"
	"slices"
	"strings"

	"github.com/pinfer/pinfer/gguf"
)

// Select picks, among graphs, the one that runs f: its arch equals the file's
// general.architecture and one of its match alternatives holds. The graph
// whose holding alternative has the most entries wins, so a ReLU variant
// beats its family.
func Select(specs []*Spec, f *gguf.File) (*Spec, error) {
	arch := f.Arch()
	var best *Spec
	bestScore := -1
	var archs []string
	var keys []string // the keys the arch's graphs match on, as the file has them
	for _, s := range specs {
		archs = append(archs, s.Name+" ("+s.Arch+")")
		if s.Arch != arch {
			continue
		}
		if score := matchScore(s, f); score > bestScore {
			best, bestScore = s, score
		}
		for _, alt := range s.Match {
			for k := range alt {
				if v := metaText(f, k); !slices.Contains(keys, v) {
					keys = append(keys, v)
				}
			}
		}
	}
	slices.Sort(keys)
	if best == nil && len(keys) > 0 {
		return nil, fmt.Errorf("%s: no built-in graph for general.architecture %q runs its metadata (%s); pass one with -g", f.Path, arch, strings.Join(keys, ", "))
	}
	if best == nil {
		return nil, fmt.Errorf("%s: general.architecture %q: no built-in graph runs it (graphs: %s); pass one with -g", f.Path, arch, strings.Join(archs, ", "))
	}
	return best, nil
}

// matchScore is the size of the largest alternative that holds, 0 for a
// graph with none, -1 when none holds.
func matchScore(s *Spec, f *gguf.File) int {
	if len(s.Match) == 0 {
		return 0
	}
	score := -1
	for _, alt := range s.Match {
		if holds(alt, f) {
			score = max(score, len(alt))
		}
	}
	return score
}

// metaText is key = value for a message, the value as the file has it.
func metaText(f *gguf.File, key string) string {
	v, ok := f.KV(key)
	if !ok {
		return key + " absent"
	}
	if s, ok := v.V.(string); ok {
		return fmt.Sprintf("%s = %q", key, s)
	}
	if s, ok := scalarText(v); ok {
		return key + " = " + s
	}
	return key + " present"
}

// scalarText is a string, number or bool value as a match writes it.
func scalarText(v gguf.Value) (string, bool) {
	switch x := v.V.(type) {
	case string:
		return x, true
	case bool, uint8, int8, uint16, int16, uint32, int32, uint64, int64, float32, float64:
		return fmt.Sprint(x), true
	}
	return "", false
}

func holds(alt map[string][]string, f *gguf.File) bool {
	for k, wants := range alt {
		if !slices.ContainsFunc(wants, func(w string) bool { return holdsOne(f, k, w) }) {
			return false
		}
	}
	return true
}

func holdsOne(f *gguf.File, key, want string) bool {
	v, ok := f.KV(key)
	got, scalar := scalarText(v)
	switch {
	case want == "*": // any value: a key only some files of the arch carry
		return ok
	case want == "-": // absent: what files from elsewhere leave out
		return !ok
	case strings.HasPrefix(want, "!"): // e.g. an expert count that is not 0
		return ok && !(scalar && got == want[1:])
	}
	return ok && scalar && got == want
}
