package graph

import (
	"fmt"
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
	for _, s := range specs {
		archs = append(archs, s.Name+" ("+s.Arch+")")
		if s.Arch != arch {
			continue
		}
		if score := matchScore(s, f); score > bestScore {
			best, bestScore = s, score
		}
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

func holds(alt map[string]string, f *gguf.File) bool {
	for k, want := range alt {
		if want == "*" { // any value: a key only some files of the arch carry
			if !f.Has(k) {
				return false
			}
			continue
		}
		got, err := f.String(k)
		if err != nil || got != want {
			return false
		}
	}
	return true
}
