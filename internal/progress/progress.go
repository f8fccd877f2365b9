// Package progress draws the bar of a command that writes a large file
// (convert, quantize), so that they show the same one.
package progress

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/schollz/progressbar/v3"
)

// Writing returns the callback a file writer reports its bytes to, which
// draws a bar on stderr from its first call, and finish, which completes
// the bar if one was drawn.
func Writing(path string) (update func(done, total int64), finish func()) {
	var bar *progressbar.ProgressBar
	update = func(done, total int64) {
		if bar == nil {
			bar = progressbar.NewOptions64(total,
				progressbar.OptionSetWriter(os.Stderr),
				progressbar.OptionSetDescription("writing "+filepath.Base(path)),
				progressbar.OptionShowBytes(true),
				progressbar.OptionShowCount(),
				progressbar.OptionSetWidth(30),
				progressbar.OptionThrottle(100*time.Millisecond),
				progressbar.OptionOnCompletion(func() { fmt.Fprintln(os.Stderr) }))
		}
		_ = bar.Set64(done)
	}
	finish = func() {
		if bar != nil {
			_ = bar.Finish()
		}
	}
	return update, finish
}
