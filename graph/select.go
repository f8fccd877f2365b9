package graph

import (
	"fmt"
	"strings"

	"github.com/pinfer/pinfer/gguf"
)

// Select picks, among graphs, the one that runs f: its arch equals the file's
// general.architecture and every match entry equals the file's metadata. The
// graph with the most match entries wins, so a ReLU variant beats its family.
func Select(specs []*Spec, f *gguf.File) (*Spec, error) {
	arch := f.Arch()
	var best *Spec
	var archs []string
	for _, s := range specs {
		archs = append(archs, s.Name+" ("+s.Arch+")")
		if s.Arch != arch || !matches(s, f) {
			continue
		}
		if best == nil || len(s.Match) > len(best.Match) {
			best = s
		}
	}
	if best == nil {
		return nil, fmt.Errorf("%s: general.architecture %q: no built-in graph runs it (graphs: %s); pass one with -g", f.Path, arch, strings.Join(archs, ", "))
	}
	return best, nil
}

func matches(s *Spec, f *gguf.File) bool {
	for k, want := range s.Match {
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
