// Package imagestore keeps the node agent's memory images: one folder per Sandbox, named by its
// UID, under one directory of the node. runsc writes its files there (checkpoint.img, pages.img,
// pages_meta.img); owner.json says whose image it is and what it holds, outcome.json what became
// of its restore. The runsc wrapper and the node agent share this layout and its checks.
package imagestore

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/util/uuid"
)

// Reasons of an Error: what a caller (the controller, the wrapper) says when it falls back.
const (
	ReasonNoImage   = "NoImage"      // no image for this Sandbox on this node
	ReasonCorrupt   = "ImageCorrupt" // a file missing or of another size than saved
	ReasonNotOwner  = "NotOwner"     // the image is not the pod's Sandbox's
	ReasonBadPath   = "BadPath"      // the path is not an image folder of this store
	ReasonNoSpace   = "NoSpace"      // the node's disk is full
	ReasonNotGVisor = "NotGVisor"    // the pod's sandbox does not run on gVisor's shim
	ReasonNoSandbox = "NoSandbox"    // no running sandbox of the pod on this node
	ReasonFailed    = "Failed"       // anything else
)

// Error is a failure with a reason a machine can act on.
type Error struct {
	Reason  string
	Message string
}

func (e *Error) Error() string { return e.Reason + ": " + e.Message }

// Errorf builds an Error.
func Errorf(reason, format string, args ...any) *Error {
	return &Error{Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// ReasonOf is err's reason, ReasonFailed when it has none.
func ReasonOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return ReasonFailed
}

// Owner is owner.json: whose image it is, and the size of every file once it is complete.
type Owner struct {
	SandboxUID string           `json:"sandboxUID"`
	Namespace  string           `json:"namespace"`
	PodName    string           `json:"podName"`
	PodUID     string           `json:"podUID"`
	SavedAt    time.Time        `json:"savedAt,omitzero"`
	Files      map[string]int64 `json:"files,omitempty"` // empty until Seal
}

// Outcome is outcome.json, written by the wrapper when a pod's sandbox starts from the image.
type Outcome struct {
	SandboxID string  `json:"sandboxID"` // the CRI pod sandbox that tried
	Restored  bool    `json:"restored"`
	Reason    string  `json:"reason,omitempty"`
	Message   string  `json:"message,omitempty"`
	Seconds   float64 `json:"seconds,omitempty"`
	// ShimPID is the shim of a failed restore: its task cannot be deleted until the shim and
	// its runsc processes are killed (docs/snapshots.md, "How it fails").
	ShimPID int `json:"shimPID,omitempty"`
}

const (
	ownerFile   = "owner.json"
	outcomeFile = "outcome.json"
)

// Store is the images' directory on the node.
type Store struct{ Dir string }

// Path is the image folder of a Sandbox.
func (s Store) Path(sandboxUID string) string { return filepath.Join(s.Dir, sandboxUID) }

// Resolve checks that path is exactly an image folder of this store, <Dir>/<a UID>, and returns
// that UID. Nothing else is ever restored: a pod must not name any file of the node.
func (s Store) Resolve(path string) (string, error) {
	uid := filepath.Base(path)
	if !filepath.IsAbs(path) || filepath.Clean(path) != path || filepath.Dir(path) != filepath.Clean(s.Dir) {
		return "", Errorf(ReasonBadPath, "%q is not an image folder of %s", path, s.Dir)
	}
	if !isUID(uid) {
		return "", Errorf(ReasonBadPath, "%q is not named for a Sandbox UID", path)
	}
	return uid, nil
}

func isUID(s string) bool {
	if len(s) != len(string(uuid.NewUUID())) {
		return false
	}
	for i, c := range s {
		dash := i == 8 || i == 13 || i == 18 || i == 23
		if dash != (c == '-') || (!dash && !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f')) {
			return false
		}
	}
	return true
}

// Prepare empties the Sandbox's folder and writes its owner (incomplete until Seal).
func (s Store) Prepare(o Owner) (string, error) {
	if !isUID(o.SandboxUID) {
		return "", Errorf(ReasonBadPath, "%q is not a Sandbox UID", o.SandboxUID)
	}
	dir := s.Path(o.SandboxUID)
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", noSpace(err)
	}
	return dir, noSpace(writeJSON(filepath.Join(dir, ownerFile), o))
}

// Seal records the size of every file runsc wrote and returns their total.
func (s Store) Seal(sandboxUID string, at time.Time) (int64, error) {
	o, err := s.Owner(sandboxUID)
	if err != nil {
		return 0, err
	}
	entries, err := os.ReadDir(s.Path(sandboxUID))
	if err != nil {
		return 0, err
	}
	o.Files, o.SavedAt = map[string]int64{}, at
	var total int64
	for _, e := range entries {
		info, err := e.Info()
		if err != nil || e.Name() == ownerFile || e.Name() == outcomeFile {
			continue
		}
		o.Files[e.Name()] = info.Size()
		total += info.Size()
	}
	if _, ok := o.Files["checkpoint.img"]; !ok {
		return 0, Errorf(ReasonCorrupt, "runsc wrote no checkpoint.img in %s", s.Path(sandboxUID))
	}
	return total, noSpace(writeJSON(filepath.Join(s.Path(sandboxUID), ownerFile), o))
}

// Owner reads a Sandbox's owner.json.
func (s Store) Owner(sandboxUID string) (Owner, error) {
	var o Owner
	data, err := os.ReadFile(filepath.Join(s.Path(sandboxUID), ownerFile))
	if errors.Is(err, os.ErrNotExist) {
		return o, Errorf(ReasonNoImage, "no image of Sandbox %s in %s", sandboxUID, s.Dir)
	}
	if err != nil {
		return o, err
	}
	if err := json.Unmarshal(data, &o); err != nil {
		return o, Errorf(ReasonCorrupt, "owner.json of %s: %v", sandboxUID, err)
	}
	return o, nil
}

// Verify checks that the image at path may restore the pod namespace/podName: it is this
// store's, it was saved from a pod of that name, it is complete, and every file has the size it
// was saved with.
func (s Store) Verify(path, namespace, podName string) (Owner, error) {
	uid, err := s.Resolve(path)
	if err != nil {
		return Owner{}, err
	}
	o, err := s.Owner(uid)
	if err != nil {
		return o, err
	}
	if o.SandboxUID != uid || o.Namespace != namespace || o.PodName != podName {
		return o, Errorf(ReasonNotOwner, "the image of %s/%s (Sandbox %s) is not pod %s/%s's", o.Namespace, o.PodName, o.SandboxUID, namespace, podName)
	}
	if len(o.Files) == 0 {
		return o, Errorf(ReasonCorrupt, "the image of Sandbox %s was never completed", uid)
	}
	for name, size := range o.Files {
		info, err := os.Stat(filepath.Join(path, name))
		if err != nil {
			return o, Errorf(ReasonCorrupt, "%s of Sandbox %s: %v", name, uid, err)
		}
		if info.Size() != size {
			return o, Errorf(ReasonCorrupt, "%s of Sandbox %s has %d bytes; %d were saved", name, uid, info.Size(), size)
		}
	}
	return o, nil
}

// Outcome reads what became of the image's restore (ok false: none tried yet).
func (s Store) Outcome(sandboxUID string) (Outcome, bool, error) {
	var out Outcome
	data, err := os.ReadFile(filepath.Join(s.Path(sandboxUID), outcomeFile))
	if errors.Is(err, os.ErrNotExist) {
		return out, false, nil
	}
	if err != nil {
		return out, false, err
	}
	return out, true, json.Unmarshal(data, &out)
}

// SetOutcome records what became of the image's restore.
func (s Store) SetOutcome(sandboxUID string, out Outcome) error {
	return writeJSON(filepath.Join(s.Path(sandboxUID), outcomeFile), out)
}

// Delete removes a Sandbox's image (none is not an error).
func (s Store) Delete(sandboxUID string) error {
	if !isUID(sandboxUID) {
		return Errorf(ReasonBadPath, "%q is not a Sandbox UID", sandboxUID)
	}
	return os.RemoveAll(s.Path(sandboxUID))
}

// List is the Sandbox UIDs that have an image folder.
func (s Store) List() ([]string, error) {
	entries, err := os.ReadDir(s.Dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	var uids []string
	for _, e := range entries {
		if e.IsDir() && isUID(e.Name()) {
			uids = append(uids, e.Name())
		}
	}
	return uids, err
}

// writeJSON writes v to path through a temporary file, so a reader never sees half of it.
func writeJSON(path string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// noSpace gives a full disk its reason.
func noSpace(err error) error {
	if err != nil && IsNoSpace(err) {
		return Errorf(ReasonNoSpace, "%v", err)
	}
	return err
}
