package main

import (
	"fmt"
	"strconv"
	"strings"
)

// intList reads a flag's comma-separated integers, as llama-bench reads
// "-p 64,512" and run reads "--prompt-ids 1,17,230".
func intList(flag, s string) ([]int, error) {
	items, err := listItems(flag, s)
	if err != nil {
		return nil, err
	}
	out := make([]int, len(items))
	for i, f := range items {
		if out[i], err = strconv.Atoi(f); err != nil {
			return nil, fmt.Errorf("%s %q: %q is not an integer", flag, s, f)
		}
	}
	return out, nil
}

// listItems splits a flag's list at commas; spaces also separate. An
// empty item ("1,,2") is a typo, not a skip.
func listItems(flag, s string) ([]string, error) {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if strings.TrimSpace(part) == "" {
			return nil, fmt.Errorf("%s %q: an empty item between commas", flag, s)
		}
		out = append(out, strings.Fields(part)...)
	}
	return out, nil
}
