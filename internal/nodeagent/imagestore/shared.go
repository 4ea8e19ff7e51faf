package imagestore

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"time"
)

// A shared save is one save of a running sandbox that several forks start from (a snapshot
// pool's members): its files are kept under <Dir>/.shared/<sandbox id> until a deadline and
// hard-linked into each fork's own image folder, so the parent is saved, and stands still,
// once, and the disk holds its memory once. A shared save is never restored from directly:
// Resolve accepts only <Dir>/<UID>, and each fork's folder has its own owner.json and outcome.

const (
	sharedDir  = ".shared"
	sharedMeta = "shared.json"
)

// sharedSave is shared.json: when the save was made, until when forks may start from it, and
// its files.
type sharedSave struct {
	SavedAt time.Time        `json:"savedAt"`
	Until   time.Time        `json:"until"`
	Files   map[string]int64 `json:"files"`
}

func (s Store) sharedPath(sandboxID string) string {
	return filepath.Join(s.Dir, sharedDir, filepath.Base(sandboxID))
}

// LinkShared fills the Sandbox's prepared folder from the shared save of sandbox id, when one
// is usable at now, and seals it. ok false: none (a fresh save is needed).
func (s Store) LinkShared(sandboxID, sandboxUID string, now time.Time) (total int64, ok bool, err error) {
	dir := s.sharedPath(sandboxID)
	meta, err := readShared(dir)
	if err != nil || !now.Before(meta.Until) || len(meta.Files) == 0 {
		return 0, false, nil
	}
	for name := range meta.Files {
		if err := os.Link(filepath.Join(dir, name), filepath.Join(s.Path(sandboxUID), name)); err != nil {
			return 0, false, noSpace(err)
		}
	}
	total, err = s.Seal(sandboxUID, meta.SavedAt)
	return total, err == nil, err
}

// ShareSave keeps the Sandbox's sealed image as the shared save of sandbox id until until,
// replacing an older one.
func (s Store) ShareSave(sandboxID, sandboxUID string, until time.Time) error {
	o, err := s.Owner(sandboxUID)
	if err != nil {
		return err
	}
	dir := s.sharedPath(sandboxID)
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return noSpace(err)
	}
	for name := range o.Files {
		if err := os.Link(filepath.Join(s.Path(sandboxUID), name), filepath.Join(dir, name)); err != nil {
			_ = os.RemoveAll(dir)
			return noSpace(err)
		}
	}
	return noSpace(writeJSON(filepath.Join(dir, sharedMeta), sharedSave{SavedAt: o.SavedAt, Until: until, Files: o.Files}))
}

// ExpireShared deletes the shared saves past their deadline at now (and any left unreadable),
// and returns how many went.
func (s Store) ExpireShared(now time.Time) (int, error) {
	entries, err := os.ReadDir(filepath.Join(s.Dir, sharedDir))
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	gone := 0
	for _, e := range entries {
		dir := filepath.Join(s.Dir, sharedDir, e.Name())
		meta, rerr := readShared(dir)
		if rerr == nil && now.Before(meta.Until) {
			continue
		}
		if errors.Is(rerr, os.ErrNotExist) {
			// Being written by ShareSave right now, or left by a crash: judged by its age.
			if info, ierr := e.Info(); ierr == nil && now.Sub(info.ModTime()) < time.Minute {
				continue
			}
		}
		if os.RemoveAll(dir) == nil {
			gone++
		}
	}
	return gone, err
}

// readShared reads a shared save's shared.json (os.ErrNotExist while it is being written).
func readShared(dir string) (sharedSave, error) {
	var meta sharedSave
	data, err := os.ReadFile(filepath.Join(dir, sharedMeta))
	if err != nil {
		return meta, err
	}
	return meta, json.Unmarshal(data, &meta)
}
