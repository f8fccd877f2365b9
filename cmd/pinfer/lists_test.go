package main

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestIntList(t *testing.T) {
	for s, want := range map[string][]int{"64": {64}, "64,512": {64, 512}, " 1, 2 3 ,4": {1, 2, 3, 4}, "-1,0": {-1, 0}} {
		got, err := intList("-p", s)
		require.NoError(t, err, s)
		require.Equal(t, want, got, s)
	}
	for s, want := range map[string]string{
		"":                     `-p "": an empty item between commas`,
		"1,,2":                 `-p "1,,2": an empty item between commas`,
		"1,":                   `-p "1,": an empty item between commas`,
		"1,x":                  `-p "1,x": "x" is not an integer`,
		"1.5":                  `-p "1.5": "1.5" is not an integer`,
		"99999999999999999999": `"99999999999999999999" is not an integer`,
	} {
		_, err := intList("-p", s)
		require.ErrorContains(t, err, want, s)
	}
}

// Any text is a list whose items, joined again, read back the same, or an
// error of one line that names the flag.
func FuzzIntList(f *testing.F) {
	for _, s := range []string{"64", "64,512", "1,,2", " 1 2,3", "x", "-0", "+5", "0x10", "1\n2", "٣"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := intList("-t", s)
		if err != nil {
			msg := err.Error()
			require.True(t, strings.HasPrefix(msg, "-t "), msg)
			require.NotContains(t, msg, "\n")
			return
		}
		require.NotEmpty(t, v)
		parts := make([]string, len(v))
		for i, x := range v {
			parts[i] = strconv.Itoa(x)
		}
		back, err := intList("-t", strings.Join(parts, ","))
		require.NoError(t, err)
		require.Equal(t, v, back)
	})
}
