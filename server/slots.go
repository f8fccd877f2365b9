package server

import (
	"errors"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/pinfer/pinfer/graph"
)

// Slot persistence, as llama-server's --slot-save-path: POST
// /slots/{id}?action=save writes a slot's cache (its tokens and their KV
// rows, graph.Session.SaveState's format) to a file of that directory,
// action=restore reads one back into a slot, and action=erase empties the
// slot. The scheduler runs them between steps, as it runs embeddings; an
// action on a slot that is generating waits until the slot is free, as
// llama-server defers it. A restored slot is the one the next request that
// continues its tokens goes to (freeSlot), which then runs only the rest.

// slotWork is a slot action inside its job: the scheduler fills out or e.
type slotWork struct {
	action   string // save, restore or erase
	id       int
	filename string
	path     string
	out      map[string]any
	e        *apiError
}

func notSupported() *apiError {
	return newError(http.StatusNotImplemented, "not_supported_error", "not_supported",
		"this server does not support slot actions: start it with --slot-save-path DIR")
}

// slotAction is POST /slots/{id}?action=save|restore|erase.
func (s *Server) slotAction(w http.ResponseWriter, r *http.Request) {
	if s.cfg.SlotSavePath == "" {
		writeError(w, notSupported())
		return
	}
	id, err := strconv.Atoi(r.PathValue("id"))
	if err != nil || id < 0 || id >= len(s.slots) {
		writeError(w, badRequest("id_slot", "invalid_value", "invalid slot id %q: this server has slots 0 to %d", r.PathValue("id"), len(s.slots)-1))
		return
	}
	sw := &slotWork{action: r.URL.Query().Get("action"), id: id}
	switch sw.action {
	case "save", "restore":
		var req struct {
			Filename *string `json:"filename"`
		}
		if e := s.decodeBody(w, r, &req); e != nil {
			writeError(w, e)
			return
		}
		if req.Filename == nil {
			writeError(w, badRequest("filename", "missing_field", "filename is required"))
			return
		}
		if !validFilename(*req.Filename) {
			writeError(w, badRequest("filename", "invalid_value", "invalid filename %q: a file name in --slot-save-path, without path separators or ..", *req.Filename))
			return
		}
		sw.filename = *req.Filename
		sw.path = filepath.Join(s.cfg.SlotSavePath, sw.filename)
		if sw.action == "restore" {
			if _, err := os.Stat(sw.path); errors.Is(err, fs.ErrNotExist) {
				writeError(w, fileNotFound(sw.filename))
				return
			}
		}
	case "erase":
	default:
		writeError(w, badRequest("action", "invalid_value", "invalid action %q: want save, restore or erase", sw.action))
		return
	}
	j := newJob(nil, nil, false, genParams{})
	j.slotOp = sw
	end, e := s.submit(r, j)
	if e != nil {
		writeError(w, e)
		return
	}
	defer end()
	for {
		if _, fin := j.take(); fin != "" {
			break
		}
		if !j.wait() {
			return // the client left
		}
	}
	if _, _, err := j.result(); err != nil {
		writeError(w, failure(err))
		return
	}
	if sw.e != nil {
		writeError(w, sw.e)
		return
	}
	writeJSON(w, http.StatusOK, sw.out)
}

func fileNotFound(name string) *apiError {
	return newError(http.StatusNotFound, "not_found_error", "file_not_found", "slot file %q is not in --slot-save-path", name)
}

// validFilename accepts a plain file name, as llama.cpp's
// fs_validate_filename: no path separators or characters Windows refuses,
// no control characters, no "..", not "." or empty, no leading or trailing
// space, no trailing dot, at most 255 bytes of UTF-8. A leading dot is
// refused too (hidden files, and the temporary ones saves write).
func validFilename(name string) bool {
	if name == "" || len(name) > 255 || !utf8.ValidString(name) || strings.Contains(name, "..") ||
		strings.HasPrefix(name, ".") || strings.HasSuffix(name, ".") ||
		strings.TrimSpace(name) != name || strings.ContainsAny(name, `/\:*?"<>|`) {
		return false
	}
	for _, r := range name {
		switch {
		case r < 0x20, r >= 0x7f && r <= 0x9f, r == 0xfeff, r == 0xfffd,
			r == 0x2215, r == 0x2216, r == 0xff0e: // division slash, set minus, fullwidth full stop
			return false
		}
	}
	return true
}

// runSlotAction runs a slot action on the scheduler goroutine; false when
// the slot is busy, for the scheduler to try again once it is free.
func (s *Server) runSlotAction(j *job) bool {
	sw := j.slotOp
	sl := s.slots[sw.id]
	if sl.job != nil {
		return false
	}
	start := time.Now()
	switch sw.action {
	case "save":
		n, err := sl.sess.SaveStateFile(sw.path)
		if err != nil {
			sw.e = newError(http.StatusInternalServerError, "server_error", "", "saving slot %d to %q: %v", sw.id, sw.filename, err)
			break
		}
		sw.out = map[string]any{"id_slot": sw.id, "filename": sw.filename, "n_saved": sl.sess.Pos(), "n_written": n,
			"timings": map[string]any{"save_ms": msSince(start)}}
	case "restore":
		n, read, err := sl.sess.LoadStateFile(sw.path)
		if err != nil {
			sw.e = restoreError(sw, err)
			break
		}
		sw.out = map[string]any{"id_slot": sw.id, "filename": sw.filename, "n_restored": n, "n_read": read,
			"timings": map[string]any{"restore_ms": msSince(start)}}
	case "erase":
		n := sl.sess.Pos()
		sl.sess.Reset()
		sw.out = map[string]any{"id_slot": sw.id, "n_erased": n}
	}
	j.end(finishStop, nil, 0, timings{})
	return true
}

// restoreError says why a file did not restore: a 404 for a file gone, a
// 400 for one of another model or a corrupt one (llama-server's "invalid
// slot save file"), a 500 for the rest.
func restoreError(sw *slotWork, err error) *apiError {
	var mm *graph.StateMismatchError
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fileNotFound(sw.filename)
	case errors.As(err, &mm), errors.As(err, new(*graph.StateFileError)):
		return badRequest("filename", "invalid_slot_file", "cannot restore slot %d from %q: %v", sw.id, sw.filename, err)
	}
	return newError(http.StatusInternalServerError, "server_error", "", "restoring slot %d from %q: %v", sw.id, sw.filename, err)
}
