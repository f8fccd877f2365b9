package grammar

import "fmt"

// Arrays: prefixItems (or the older items-as-a-list) for the first
// elements, items for the rest, minItems and maxItems as counts.

// scLegacyItems rewrites the older items-as-a-list (with additionalItems)
// as prefixItems (with items); additionalItems beside a schema items
// means nothing.
func scLegacyItems(s *jsonNode, path string) (*jsonNode, error) {
	if scItemsList(s) {
		if s.get("prefixItems") != nil {
			return nil, scErr(path, "both prefixItems and a list of items")
		}
		out := scWithout(s, "items", "additionalItems")
		out.set("prefixItems", s.get("items"))
		if ai := s.get("additionalItems"); ai != nil {
			out.set("items", ai)
		}
		return out, nil
	}
	if s.get("additionalItems") != nil {
		return scWithout(s, "additionalItems"), nil
	}
	return s, nil
}

// scItemsList says whether s has the older items-as-a-list.
func scItemsList(s *jsonNode) bool {
	it := s.get("items")
	return it != nil && it.kind == jsArray
}

// array is the body for arrays of schema s.
func (g *schemaGen) array(s *jsonNode, path, hint string) (string, error) {
	if err := scRefuse(s, path, kArray); err != nil {
		return "", err
	}
	if u := s.get("uniqueItems"); u != nil && !(u.kind == jsBool && !u.b) {
		return "", scErr(path, `unsupported keyword "uniqueItems"`)
	}
	legacy := scItemsList(s)
	s, err := scLegacyItems(s, path)
	if err != nil {
		return "", err
	}
	prefixPath, itemsPath := path+"/prefixItems", path+"/items"
	if legacy {
		prefixPath, itemsPath = path+"/items", path+"/additionalItems"
	}
	lo, hi, _, err := scCounts(s, "minItems", "maxItems", path)
	if err != nil {
		return "", err
	}
	prefix, err := scPrefixItems(s, prefixPath)
	if err != nil {
		return "", err
	}
	defer g.inside()()
	var exprs []string // the schemas of the first elements
	for i, p := range prefix {
		if hi >= 0 && int64(i) >= hi {
			break
		}
		e, err := g.compile(p, fmt.Sprintf("%s/%d", prefixPath, i), fmt.Sprintf("%s-%d", hint, i))
		if err != nil {
			return "", err
		}
		if e == "" {
			hi = int64(i) // no element can be here, nor after
			break
		}
		exprs = append(exprs, e)
	}
	item := "value" // the schema of the rest
	if hi < 0 || int64(len(exprs)) < hi {
		if it := s.get("items"); it != nil {
			if item, err = g.compile(it, itemsPath, hint+"-item"); err != nil {
				return "", err
			}
		}
		if item == "" {
			hi = int64(len(exprs))
		}
	}
	if hi >= 0 && lo > hi {
		return "", nil
	}
	if hi == 0 {
		return `"[" ws "]"`, nil
	}
	if len(exprs) == 0 && item == "value" && lo == 0 && hi < 0 {
		return "array", nil
	}
	elem := func(i int) string {
		if i < len(exprs) {
			return exprs[i]
		}
		return item
	}
	// rest(i): the elements from i on, once i have been written.
	var rest func(i int) string
	rest = func(i int) string {
		if hi >= 0 && int64(i) >= hi {
			return ""
		}
		if i >= len(exprs) {
			one := g.define(hint+"-next", `"," ws `+item+" ws")
			return g.repeat(one, max(lo-int64(i), 0), hi-int64(i), hint+"-next")
		}
		piece := scSeq(`"," ws `+exprs[i]+" ws", rest(i+1))
		if int64(i) >= lo {
			piece = scOpt(piece)
		}
		if i+1 < len(exprs) {
			piece = g.define(hint+"-rest", piece)
		}
		return piece
	}
	first := scSeq(elem(0)+" ws", rest(1))
	if lo == 0 {
		first = scOpt(first)
	}
	return scSeq(`"[" ws`, first, `"]"`), nil
}
