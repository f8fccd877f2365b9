package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// llama.cpp's -np names serve's slots and -ctk the KV cache's type,
// wherever the root's flag puts the command; other commands' -n... flags are
// left alone.
func TestRewriteFlags(t *testing.T) {
	for in, want := range map[string]string{
		"serve -np 2":                  "serve --parallel 2",
		"serve -c 64 -np=3":            "serve -c 64 --parallel=3",
		"--cpuprofile f serve -np 2":   "--cpuprofile f serve --parallel 2",
		"--cpuprofile=f serve -np 2":   "--cpuprofile=f serve --parallel 2",
		"--cpuprofile serve run -np 2": "--cpuprofile serve run -np 2", // "serve" is the profile's file
		"run -np 2":                    "run -np 2",
		"bench -m serve -np 2":         "bench -m serve -np 2",
	} {
		args := strings.Fields(in)
		rewriteFlags(args)
		require.Equal(t, want, strings.Join(args, " "), in)
	}
}
