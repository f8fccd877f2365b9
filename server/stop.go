package server

import "strings"

// stopWords are a request's stop strings. hit, when set, receives the one
// the text was cut at (llama-server's stopping_word): the scheduler's
// stopper writes it before the job ends, the handler reads it after.
type stopWords struct {
	words []string
	hit   *string
}

// stopper cuts generated text at the first stop string. While the text ends
// with what could be the start of a stop string, that tail is held back, so
// a streaming client never sees part of a stop string.
type stopper struct {
	stops stopWords
	held  string
}

// add takes the next text and returns what may be sent now; hit says a stop
// string was found, and then the text from it on is dropped.
func (s *stopper) add(text string) (out string, hit bool) {
	buf := s.held + text
	if len(s.stops.words) == 0 {
		s.held = ""
		return buf, false
	}
	first, word := -1, ""
	for _, st := range s.stops.words {
		if k := strings.Index(buf, st); k >= 0 && (first < 0 || k < first) {
			first, word = k, st
		}
	}
	if first >= 0 {
		s.held = ""
		if s.stops.hit != nil {
			*s.stops.hit = word
		}
		return buf[:first], true
	}
	keep := 0
	for _, st := range s.stops.words {
		keep = max(keep, heldPrefix(buf, st))
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
