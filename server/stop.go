package server

import "strings"

// stopper cuts generated text at the first stop string. While the text ends
// with what could be the start of a stop string, that tail is held back, so
// a streaming client never sees part of a stop string.
type stopper struct {
	stops []string
	held  string
}

// add takes the next text and returns what may be sent now; hit says a stop
// string was found, and then the text from it on is dropped.
func (s *stopper) add(text string) (out string, hit bool) {
	buf := s.held + text
	if len(s.stops) == 0 {
		s.held = ""
		return buf, false
	}
	first := -1
	for _, st := range s.stops {
		if k := strings.Index(buf, st); k >= 0 && (first < 0 || k < first) {
			first = k
		}
	}
	if first >= 0 {
		s.held = ""
		return buf[:first], true
	}
	keep := 0
	for _, st := range s.stops {
		for l := min(len(st)-1, len(buf)); l > keep; l-- {
			if strings.HasSuffix(buf, st[:l]) {
				keep = l
				break
			}
		}
	}
	s.held = buf[len(buf)-keep:]
	return buf[:len(buf)-keep], false
}

// flush returns the held-back text once generation ends without a stop.
func (s *stopper) flush() string {
	out := s.held
	s.held = ""
	return out
}
