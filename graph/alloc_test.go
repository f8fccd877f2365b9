package graph

import (
	"testing"

	"github.com/pinfer/pinfer/ops"
)

// BenchmarkDecodeStep times one decode step of stories260K and reports its
// allocations (the executor reuses its frame; what remains is in ops).
func BenchmarkDecodeStep(b *testing.B) {
	p, err := build(b, llamaTOML(b))
	if err != nil {
		b.Fatal(err)
	}
	pool := ops.NewPool(2)
	defer pool.Close()
	s := p.NewSession(4096, pool)
	if _, err := s.Forward([]int{1, 2, 3}, false); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if s.Pos() >= 4000 {
			s.Reset()
		}
		if _, err := s.Forward([]int{5}, false); err != nil {
			b.Fatal(err)
		}
	}
}
