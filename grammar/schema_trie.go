package grammar

import "slices"

// Many literals as a trie: the matcher follows each alternative that the
// text so far could be, so texts with a common prefix share it; and the
// complement of a set of names, for the keys of additional properties.

// scTrie is texts by their characters: the children of a node in the
// order they first come, end where a text ends.
type scTrie struct {
	end   bool
	next  map[rune]*scTrie
	order []rune
}

func scNewTrie(texts []string) *scTrie {
	root := &scTrie{next: map[rune]*scTrie{}}
	for _, t := range texts {
		n := root
		for _, r := range t {
			c, ok := n.next[r]
			if !ok {
				c = &scTrie{next: map[rune]*scTrie{}}
				n.next[r] = c
				n.order = append(n.order, r)
			}
			n = c
		}
		n.end = true
	}
	return root
}

// scManyAlts is where literal alternatives start to share their
// prefixes: the matcher keeps one reading of each alternative that the
// text so far could be (at most 4096).
const scManyAlts = 32

// literals is the alternatives of the texts; many are written as a trie,
// so that those with a common prefix are one reading until they part.
func (g *schemaGen) literals(texts []string, hint string) string {
	if len(texts) <= scManyAlts {
		lits := make([]string, len(texts))
		for i, t := range texts {
			lits[i] = scLit(t)
		}
		return scAlts(lits)
	}
	var expr func(n *scTrie) string
	expr = func(n *scTrie) string {
		var alts []string
		for _, r := range n.order {
			run, c := []rune{r}, n.next[r]
			for !c.end && len(c.order) == 1 { // a run with no choice
				run = append(run, c.order[0])
				c = c.next[c.order[0]]
			}
			rest := ""
			if len(c.order) > 0 {
				rest = expr(c)
			}
			alts = append(alts, scSeq(scLit(string(run)), rest))
		}
		if n.end {
			alts = append(alts, "")
		}
		if len(alts) == 1 {
			return alts[0]
		}
		return g.define(hint+"-trie", scAlts(alts))
	}
	return expr(scNewTrie(texts))
}

// keyNotIn is a rule for JSON strings other than the names, each
// character written one way (no \u escapes, no \/), so that a name
// cannot come back in another spelling.
func (g *schemaGen) keyNotIn(names []string, hint string) string {
	g.use("key-char")
	var rule func(t *scTrie) string
	rule = func(t *scTrie) string {
		var alts []string
		raw := `[^"\\\x00-\x1f`
		esc := []byte(`"\bfnrt`)
		for _, r := range t.order {
			var unit string
			switch e, short := scShortEscape(r); {
			case short:
				esc = slices.DeleteFunc(esc, func(c byte) bool { return c == e })
				unit = scLit(`\` + string(rune(e)))
			case r < 0x20:
				continue // only a \u escape writes it, which keys here do not use
			default:
				raw += scClassChar(r)
				unit = scLit(string(r))
			}
			alts = append(alts, scSeq(unit, rule(t.next[r])))
		}
		other := raw + "]"
		if len(t.order) == 0 {
			other = "key-char"
		} else if len(esc) > 0 {
			other = "( " + other + " | " + scEscapes(esc) + " )"
		}
		alts = append(alts, other+" key-char*")
		if !t.end {
			alts = append(alts, "")
		}
		return g.define(hint, scAlts(alts))
	}
	return g.define(hint, scInQuotes(rule(scNewTrie(names))))
}
