package grammar

import (
	"fmt"
	"strconv"
)

// Counted repetition (maxItems, maxLength) without ambiguity: counts past
// GBNF's bound of 1000 are written with rules for item{10^j}.

// repeat is item (a rule name) lo to hi times (hi < 0: no bound), without
// ambiguity; counts past 1000 (GBNF's bound) are made of rules for
// item{10^j}.
func (g *schemaGen) repeat(item string, lo, hi int64, hint string) string {
	var parts []string
	if lo > 0 {
		parts = append(parts, g.exactly(item, lo, hint))
	}
	switch {
	case hi < 0:
		parts = append(parts, item+"*")
	case hi > lo:
		parts = append(parts, g.upTo(item, hi-lo, hint))
	}
	return scSeq(parts...)
}

// power is the rule for item repeated 10^j times.
func (g *schemaGen) power(item string, j int, hint string) string {
	p := g.powers[item]
	if len(p) == 0 {
		p = []string{item}
	}
	for len(p) <= j {
		p = append(p, g.define(fmt.Sprintf("%s-x1e%d", hint, len(p)), scTimes(p[len(p)-1], 10, 10)))
	}
	g.powers[item] = p
	return p[j]
}

func (g *schemaGen) exactly(item string, n int64, hint string) string {
	if n <= 1000 {
		return scTimes(item, n, n)
	}
	ds := strconv.FormatInt(n, 10)
	var parts []string
	for i, c := range ds {
		d := int64(c - '0')
		parts = append(parts, scTimes(g.power(item, len(ds)-1-i, hint), d, d))
	}
	return scSeq(parts...)
}

// upTo is item 0 to m times: for m's decimal digits d (the power 10^p
// each), either d blocks of 10^p and at most the rest, or fewer blocks
// and any count under 10^p.
func (g *schemaGen) upTo(item string, m int64, hint string) string {
	if m <= 1000 {
		return scTimes(item, 0, m)
	}
	ds := strconv.FormatInt(m, 10)
	under := func(p int) string { // 0 to 10^p - 1 items
		var parts []string
		for j := p - 1; j >= 0; j-- {
			parts = append(parts, scTimes(g.power(item, j, hint), 0, 9))
		}
		return scSeq(parts...)
	}
	le := ""
	for i := len(ds) - 1; i >= 0; i-- {
		p, d := len(ds)-1-i, int64(ds[i]-'0')
		if d == 0 {
			continue // the same as what follows
		}
		u := g.power(item, p, hint)
		alts := []string{scSeq(scTimes(u, d, d), le), scSeq(scTimes(u, 0, d-1), under(p))}
		le = g.define(hint+"-upto", scAlts(alts))
	}
	return le
}
