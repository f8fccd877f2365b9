package grammar

import "slices"

// Objects: properties in the order the schema declares them, the
// optional ones skippable, then any additional properties.

// object is the body for objects of schema s.
func (g *schemaGen) object(s *jsonNode, path, hint string) (string, error) {
	if err := scRefuse(s, path, kObject); err != nil {
		return "", err
	}
	props, err := scProperties(s, path)
	if err != nil {
		return "", err
	}
	required, err := scStrings(s.get("required"), path+"/required")
	if err != nil {
		return "", err
	}
	ap := s.get("additionalProperties")
	if ap != nil {
		if err := scIsSchema(ap, path+"/additionalProperties"); err != nil {
			return "", err
		}
	}
	defer g.inside()()

	type member struct {
		key, expr string
		req       bool
	}
	var ms []member
	var names []string // every declared name: what other members may not be called
	isReq, declared := map[string]bool{}, map[string]bool{}
	for _, k := range required {
		isReq[k] = true
	}
	if props != nil {
		for i, k := range props.keys {
			names = append(names, k)
			declared[k] = true
			req := isReq[k]
			e, err := g.compile(props.vals[i], path+"/properties/"+scPtrEsc(k), hint+"-"+k)
			if err != nil {
				return "", err
			}
			if e == "" {
				if req {
					return "", nil
				}
				continue
			}
			ms = append(ms, member{k, e, req})
		}
	}
	// Required names that properties lack take additionalProperties'
	// schema.
	for _, k := range required {
		if declared[k] {
			continue
		}
		names = append(names, k)
		e := "value"
		if ap != nil {
			if e, err = g.compile(ap, path+"/additionalProperties", hint+"-"+k); err != nil {
				return "", err
			}
			if e == "" {
				return "", nil
			}
		}
		ms = append(ms, member{k, e, true})
	}
	extra := "" // the value of other members; "" none
	switch {
	case ap == nil:
		if props == nil && len(required) == 0 {
			extra = "value"
		}
	case ap.kind == jsBool:
		if ap.b {
			extra = "value"
		}
	default:
		if extra, err = g.compile(ap, path+"/additionalProperties", hint+"-additional"); err != nil {
			return "", err
		}
	}
	if len(ms) == 0 && extra == "" {
		return `"{" ws "}"`, nil
	}
	if len(ms) == 0 && extra == "value" {
		return "object", nil
	}

	extraMember, extraTail := "", ""
	if extra != "" {
		key := "string"
		if len(names) > 0 {
			key = g.keyNotIn(names, hint+"-key")
		}
		extraMember = g.define(hint+"-additional-kv", scMember(key, extra))
		extraTail = `( "," ws ` + extraMember + " )*"
	}
	kv := func(m member) string { return scMember(scLit(scQuoted(m.key)), m.expr) }

	// The matcher keeps a reading for each member that may come next:
	// the optional ones up to the next required one.
	run := 0
	for _, m := range ms {
		if run++; m.req {
			run = 0
		}
		if run > scMaxOptional {
			return "", scErr(path+"/properties", "more than %d optional properties in a row: too many for the matcher to follow at once (make some required)", scMaxOptional)
		}
	}
	// tails[i]: the members from i on, after one has been written.
	firsts := 0 // how many members can come first: up to the first required one
	for firsts < len(ms) {
		firsts++
		if ms[firsts-1].req {
			break
		}
	}
	piece := func(i int) string {
		p := `"," ws ` + kv(ms[i])
		if !ms[i].req {
			p = scOpt(p)
		}
		return p
	}
	tails := make([]string, len(ms)+1)
	if firsts > 0 {
		// After the last member that can come first, the rest is one
		// sequence.
		var flat []string
		for i := firsts; i < len(ms); i++ {
			flat = append(flat, piece(i))
		}
		tails[firsts] = scSeq(append(flat, extraTail)...)
	}
	for i := firsts; i >= 1; i-- {
		if i < firsts {
			tails[i] = scSeq(piece(i), tails[i+1])
		}
		if firsts > 1 && tails[i] != "" {
			tails[i] = g.define(hint+"-rest", tails[i]) // used twice: by a first member and the one before
		}
	}
	var alts []string
	for i := 0; i < firsts; i++ {
		alts = append(alts, scSeq(kv(ms[i]), tails[i+1]))
	}
	allOptional := !slices.ContainsFunc(ms, func(m member) bool { return m.req })
	if allOptional {
		if extraMember != "" {
			alts = append(alts, scSeq(extraMember, extraTail))
		}
		alts = append(alts, "")
	}
	return scSeq(`"{" ws`, scAlts(alts), `"}"`), nil
}

// scMember is a member of an object: its key, then its value.
func scMember(key, value string) string { return key + ` ws ":" ws ` + value + " ws" }

// scMaxOptional bounds a run of optional properties (see object).
const scMaxOptional = 1000
