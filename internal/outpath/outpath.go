// Package outpath checks, before a command does any work, that it may write
// its output where it was asked to: a profile, a training run or a
// conversion that fails at its last step has lost its time, and one that
// writes over its own input has lost the input.
package outpath

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Input is a file the command reads, and what named it (a flag such as
// "-m", or a description such as "checkpoint file").
type Input struct{ Name, Path string }

// Check refuses an output path that is one of the inputs (the same path,
// or the same file through a link), a directory, or one in a directory the
// command cannot create files in. Inputs with an empty path are skipped.
// The error names what was wrong; the caller adds the command and flag.
func Check(out string, inputs ...Input) error {
	ost, oerr := os.Stat(out)
	for _, in := range inputs {
		if in.Path == "" {
			continue
		}
		same := filepath.Clean(in.Path) == filepath.Clean(out)
		if ist, err := os.Stat(in.Path); err == nil && oerr == nil && os.SameFile(ist, ost) {
			same = true
		}
		if same {
			return fmt.Errorf("is the input %s %s; writing it would destroy it, name another file", in.Name, in.Path)
		}
	}
	if oerr == nil && ost.IsDir() {
		return errors.New("is a directory, want a file name")
	}
	// A probe file: permissions alone do not say (read-only mounts, ACLs).
	dir := filepath.Dir(out)
	probe, err := os.CreateTemp(dir, "."+filepath.Base(out)+".*.tmp")
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return fmt.Errorf("cannot write in %s: %v", dir, err)
	}
	probe.Close()
	os.Remove(probe.Name())
	return nil
}

// Replace writes path through write into a new file beside it, renamed over
// path once complete and synced, so that a failed write leaves neither a
// half file nor a changed one, and a reader never sees half a file.
func Replace(path string, write func(w io.Writer) error) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	err = write(f)
	if err == nil {
		err = f.Chmod(0o644)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}
