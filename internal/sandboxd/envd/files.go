package envd

import (
	"compress/gzip"
	"errors"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"

	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/respond"
	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/rootfs"
)

// uploadedEntry is envd's answer per written file.
type uploadedEntry struct {
	Path string `json:"path"`
	Name string `json:"name"`
	Type string `json:"type"`
}

// download serves GET /files?path=: the file's bytes (ranges and
// conditional requests too, through http.ServeContent).
func (s *Service) download(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Query().Get("path")
	if p == "" {
		writeError(w, http.StatusBadRequest, "the path query parameter is required")
		return
	}
	rel, err := s.cfg.FS.Resolve(p, true)
	if err != nil {
		fail(w, s.log, err)
		return
	}
	f, err := s.cfg.FS.Open(rel)
	if err != nil {
		fail(w, s.log, err)
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		fail(w, s.log, err)
		return
	}
	if fi.IsDir() {
		writeError(w, http.StatusBadRequest, "path "+clientPath(rel)+" is a directory")
		return
	}
	if !fi.Mode().IsRegular() {
		writeError(w, http.StatusBadRequest, "path "+clientPath(rel)+" is not a regular file")
		return
	}
	name := path.Base(clientPath(rel))
	w.Header().Set("Content-Disposition", mime.FormatMediaType("inline", map[string]string{"filename": name}))
	if w.Header().Get("Content-Type") == "" {
		w.Header().Set("Content-Type", "application/octet-stream")
	}
	http.ServeContent(w, r, "", fi.ModTime(), f)
}

// upload serves POST /files: a raw body (application/octet-stream, maybe
// gzip-encoded) written to ?path=, or multipart/form-data whose "file"
// parts are written to ?path= (one part) or to each part's file name.
// Every file is written atomically, parents created.
func (s *Service) upload(w http.ResponseWriter, r *http.Request) {
	for k := range r.Header {
		if strings.HasPrefix(http.CanonicalHeaderKey(k), "X-Metadata-") {
			writeError(w, http.StatusBadRequest, "file metadata (X-Metadata-* headers) is not supported by this sandbox")
			return
		}
	}
	if s.cfg.MaxUploadBytes > 0 {
		r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxUploadBytes)
	}
	target := r.URL.Query().Get("path")
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	var written []uploadedEntry
	switch {
	case err == nil && mt == "multipart/form-data":
		written, err = s.uploadMultipart(r, target)
	case target == "":
		err = respond.BadRequest("the path query parameter is required for a raw upload")
	default:
		var e uploadedEntry
		if e, err = s.uploadRaw(r, target); err == nil {
			written = []uploadedEntry{e}
		}
	}
	if err != nil {
		s.failUpload(w, err)
		return
	}
	respond.JSON(w, http.StatusOK, written)
}

func (s *Service) uploadRaw(r *http.Request, target string) (uploadedEntry, error) {
	var body io.Reader = r.Body
	switch enc := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding"))); enc {
	case "", "identity":
	case "gzip":
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			return uploadedEntry{}, respond.BadRequest("invalid gzip body: %v", err)
		}
		defer zr.Close()
		body = zr
	default:
		return uploadedEntry{}, respond.Errorf(http.StatusUnsupportedMediaType, "unsupported Content-Encoding %q (identity or gzip)", enc)
	}
	return s.writeFile(target, body)
}

func (s *Service) uploadMultipart(r *http.Request, target string) ([]uploadedEntry, error) {
	mr, err := r.MultipartReader()
	if err != nil {
		return nil, respond.BadRequest("invalid multipart body: %v", err)
	}
	var out []uploadedEntry
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, readFailure(err)
		}
		if part.FormName() != "file" {
			_ = part.Close()
			continue
		}
		dest := target
		if dest == "" || len(out) > 0 {
			// The client's name for the file, unshortened (Part.FileName
			// keeps only its base).
			_, params, _ := mime.ParseMediaType(part.Header.Get("Content-Disposition"))
			dest = params["filename"]
		}
		if dest == "" {
			return nil, respond.BadRequest(`a "file" part needs a path: set ?path= or the part's filename`)
		}
		e, err := s.writeFile(dest, part)
		_ = part.Close()
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	if len(out) == 0 {
		return nil, respond.BadRequest(`multipart body has no "file" part`)
	}
	return out, nil
}

// writeFile writes src to the client path p atomically; a file replaced
// keeps its permissions, a new one gets 0644.
func (s *Service) writeFile(p string, src io.Reader) (uploadedEntry, error) {
	rel, err := s.cfg.FS.Resolve(p, true)
	if err != nil {
		return uploadedEntry{}, err
	}
	if rel == "." {
		return uploadedEntry{}, respond.BadRequest("path %q is a directory (the sandbox root)", p)
	}
	mode := fs.FileMode(0o644)
	if fi, err := s.cfg.FS.Stat(rel); err == nil {
		if fi.IsDir() {
			return uploadedEntry{}, respond.BadRequest("path %q is a directory", p)
		}
		mode = fi.Mode().Perm()
	}
	if err := s.cfg.FS.WriteFileAtomic(rel, src, mode); err != nil {
		return uploadedEntry{}, err
	}
	cp := clientPath(rel)
	return uploadedEntry{Path: cp, Name: path.Base(cp), Type: "file"}, nil
}

// readFailure turns a failure to read the body into the client's error.
func readFailure(err error) error {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return respond.Errorf(http.StatusRequestEntityTooLarge, "upload larger than %d bytes", mbe.Limit)
	}
	return respond.BadRequest("reading the upload: %v", err)
}

func (s *Service) failUpload(w http.ResponseWriter, err error) {
	var re *rootfs.ReadError
	if errors.As(err, &re) {
		err = readFailure(re.Err)
	}
	fail(w, s.log, err)
}
