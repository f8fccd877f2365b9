package grammar

// Strings: minLength and maxLength, the formats checked, and pattern
// (schema_pattern.go).

// str is the body for strings of schema s.
func (g *schemaGen) str(s *jsonNode, path, hint string) (string, error) {
	lo, hi, counted, err := scCounts(s, "minLength", "maxLength", path)
	if err != nil {
		return "", err
	}
	format := ""
	if f := s.get("format"); f != nil && f.kind == jsString {
		format = scFormats[f.s]
	}
	if p := s.get("pattern"); p != nil {
		if format != "" || counted {
			return "", scErr(path, "pattern together with format, minLength or maxLength is not supported")
		}
		if p.kind != jsString {
			return "", scErr(path+"/pattern", "pattern must be a string")
		}
		return g.pattern(p.s, path+"/pattern", hint)
	}
	if format != "" {
		if counted {
			return "", scErr(path, "format %q together with minLength or maxLength is not supported", s.get("format").s)
		}
		return scInQuotes(g.use(format)), nil
	}
	if hi >= 0 && lo > hi {
		return "", nil
	}
	if lo == 0 && hi < 0 {
		return "string", nil
	}
	// A surrogate pair of \u escapes is one character to JSON Schema, so
	// counted strings leave them out.
	return scInQuotes(g.repeat(g.use("char-nosur"), lo, hi, hint+"-char")), nil
}
