package hugepage

import (
	"bufio"
	"io"
	"strconv"
	"strings"
)

// parseSmaps finds in a /proc/PID/smaps listing the mapping that starts at
// addr and returns its resident bytes and those mapped in 2 MB pages (a
// file's PMD-mapped folios, or anonymous huge pages).
func parseSmaps(r io.Reader, addr uintptr) (huge, rss int64, ok bool) {
	sc := bufio.NewScanner(r)
	in := false
	for sc.Scan() {
		line := sc.Text()
		key, rest, isField := strings.Cut(line, ":")
		if !isField || strings.Contains(key, "-") {
			// A mapping's header: start-end perms offset dev inode [path].
			span, _, _ := strings.Cut(line, " ")
			lo, _, _ := strings.Cut(span, "-")
			start, err := strconv.ParseUint(lo, 16, 64)
			if in {
				return huge, rss, true // the next mapping: ours is done
			}
			in = err == nil && uintptr(start) == addr
			continue
		}
		if !in {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil {
			continue
		}
		switch key {
		case "Rss":
			rss = kb << 10
		case "FilePmdMapped", "AnonHugePages", "ShmemPmdMapped":
			huge += kb << 10
		}
	}
	return huge, rss, in
}
