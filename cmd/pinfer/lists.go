package main

import (
	"fmt"
	"strconv"
	"strings"
)

// intList reads a flag's comma-separated integers, as llama-bench reads
// "-p 64,512" and run reads "--prompt-ids 1,17,230"; spaces also separate.
// An empty item ("1,,2") is a typo, not a skip.
func intList(flag, s string) ([]int, error) {
	var out []int
	for _, part := range strings.Split(s, ",") {
		if strings.TrimSpace(part) == "" {
			return nil, fmt.Errorf("%s %q: an empty item between commas", flag, s)
		}
		for _, f := range strings.Fields(part) {
			v, err := strconv.Atoi(f)
			if err != nil {
				return nil, fmt.Errorf("%s %q: %q is not an integer", flag, s, f)
			}
			out = append(out, v)
		}
	}
	return out, nil
}
