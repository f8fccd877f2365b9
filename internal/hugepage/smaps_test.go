package hugepage

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const smaps = `7f0000000000-7f0000200000 r--p 00000000 fd:01 12 /usr/lib/x.so
Size:               2048 kB
Rss:                 100 kB
FilePmdMapped:         0 kB
7f1000000000-7f10e6000000 r--s 00000000 fd:01 34 /models/m.gguf
Size:            3768320 kB
KernelPageSize:        4 kB
Rss:             3727360 kB
AnonHugePages:         0 kB
ShmemPmdMapped:        0 kB
FilePmdMapped:   3723264 kB
VmFlags: rd sh mr mw me ms hg
7f2000000000-7f2000001000 rw-p 00000000 00:00 0
Rss:                   4 kB
FilePmdMapped:      2048 kB
`

func TestParseSmaps(t *testing.T) {
	huge, rss, ok := parseSmaps(strings.NewReader(smaps), 0x7f1000000000)
	require.True(t, ok)
	require.Equal(t, int64(3723264)<<10, huge)
	require.Equal(t, int64(3727360)<<10, rss)
	_, _, ok = parseSmaps(strings.NewReader(smaps), 0x7f1000001000) // not a mapping's start
	require.False(t, ok)
	huge, rss, ok = parseSmaps(strings.NewReader(smaps), 0x7f2000000000) // the last one
	require.True(t, ok)
	require.Equal(t, int64(2048)<<10, huge)
	require.Equal(t, int64(4)<<10, rss)
}
