package grammar

import (
	"fmt"
	"math/big"
	"strings"
)

// Integers in the bounds of minimum, maximum and their exclusive forms,
// as digit strings in decimal.

// integer is the body for integers of schema s, in its bounds.
func (g *schemaGen) integer(s *jsonNode, path string) (string, error) {
	if err := scRefuse(s, path, kNumber|kInteger); err != nil {
		return "", err
	}
	var lo, hi *big.Int
	bound := func(k string, upper, strict bool) error {
		v := s.get(k)
		if v == nil || v.kind == jsBool {
			return nil
		}
		if v.kind != jsNumber {
			return scErr(path+"/"+k, "%s must be a number", k)
		}
		r := scRat(v.s)
		if r == nil {
			return scErr(path+"/"+k, "%s is out of range", k)
		}
		// floor, or the integer past it when strict and r is one
		n := new(big.Int).Div(r.Num(), r.Denom())
		if upper {
			if strict && r.IsInt() {
				n.Sub(n, big.NewInt(1))
			}
			if hi == nil || n.Cmp(hi) < 0 {
				hi = n
			}
			return nil
		}
		if !r.IsInt() || strict {
			n.Add(n, big.NewInt(1))
		}
		if lo == nil || n.Cmp(lo) > 0 {
			lo = n
		}
		return nil
	}
	isTrue := func(k string) bool { v := s.get(k); return v != nil && v.kind == jsBool && v.b }
	for _, b := range []struct {
		k             string
		upper, strict bool
	}{
		{"minimum", false, isTrue("exclusiveMinimum")},
		{"maximum", true, isTrue("exclusiveMaximum")},
		{"exclusiveMinimum", false, true},
		{"exclusiveMaximum", true, true},
	} {
		if err := bound(b.k, b.upper, b.strict); err != nil {
			return "", err
		}
	}
	if lo == nil && hi == nil {
		return g.use("integer"), nil
	}
	return scIntRange(lo, hi), nil
}

// scIntRange is the integers from lo to hi (nil: no bound) in decimal,
// without leading zeros.
func scIntRange(lo, hi *big.Int) string {
	zero, one := big.NewInt(0), big.NewInt(1)
	var alts []string
	if lo == nil || lo.Sign() < 0 {
		// -a to -b, for a >= b >= 1
		b := one
		if hi != nil && hi.Sign() < 0 {
			b = new(big.Int).Neg(hi)
		}
		var a *big.Int
		if lo != nil {
			a = new(big.Int).Neg(lo)
		}
		if n := scNatRange(b, a); n != "" {
			alts = append(alts, `"-" `+scGroup(n))
		}
	}
	if hi == nil || hi.Sign() >= 0 {
		a := zero
		if lo != nil && lo.Sign() > 0 {
			a = lo
		}
		if n := scNatRange(a, hi); n != "" {
			alts = append(alts, n)
		}
	}
	return scAlts(alts)
}

// scNatRange is the numbers from a >= 0 to b (nil: no bound).
func scNatRange(a, b *big.Int) string {
	if b != nil && a.Cmp(b) > 0 {
		return ""
	}
	as := a.String()
	nines := strings.Repeat("9", len(as))
	if b != nil {
		bs := b.String()
		if len(bs) == len(as) {
			return scSameLen(as, bs)
		}
		alts := []string{scSameLen(as, nines)}
		if len(bs)-2 >= len(as) { // the lengths between
			alts = append(alts, scSeq("[1-9]", scDigits(int64(len(as)), int64(len(bs)-2))))
		}
		alts = append(alts, scSameLen("1"+strings.Repeat("0", len(bs)-1), bs))
		return scAlts(alts)
	}
	longer := fmt.Sprintf("[1-9] [0-9]{%d,}", len(as))
	if len(as) == 1 {
		longer = "[1-9] [0-9]+"
	}
	return scAlts([]string{scSameLen(as, nines), longer})
}

func scDigits(lo, hi int64) string { return scTimes("[0-9]", lo, hi) }

// scSameLen is the numbers from x to y, both of the same length (and so
// either both 0-9 or both without a leading zero).
func scSameLen(x, y string) string {
	if x == "" {
		return ""
	}
	if x[0] == y[0] {
		return scSeq(scLit(x[:1]), scSameLen(x[1:], y[1:]))
	}
	n := int64(len(x) - 1)
	if strings.Trim(x[1:], "0") == "" && strings.Trim(y[1:], "9") == "" {
		return scSeq(fmt.Sprintf("[%c-%c]", x[0], y[0]), scDigits(n, n))
	}
	alts := []string{scSeq(scLit(x[:1]), scBeyond(x[1:], true))}
	if x[0]+1 <= y[0]-1 {
		alts = append(alts, scSeq(fmt.Sprintf("[%c-%c]", x[0]+1, y[0]-1), scDigits(n, n)))
	}
	alts = append(alts, scSeq(scLit(y[:1]), scBeyond(y[1:], false)))
	return scAlts(alts)
}

// scBeyond is the digit strings of len(s) that are >= s (up) or <= s.
func scBeyond(s string, up bool) string {
	n := int64(len(s))
	free := "0" // an s of this digit only bounds nothing
	if !up {
		free = "9"
	}
	if strings.Trim(s, free) == "" {
		return scDigits(n, n)
	}
	alts := []string{scSeq(scLit(s[:1]), scBeyond(s[1:], up))}
	lo, hi := s[0]+1, byte('9') // the first digits past s's
	if !up {
		lo, hi = '0', s[0]-1
	}
	if lo <= hi {
		alts = append(alts, scSeq(fmt.Sprintf("[%c-%c]", lo, hi), scDigits(n-1, n-1)))
	}
	return scAlts(alts)
}
