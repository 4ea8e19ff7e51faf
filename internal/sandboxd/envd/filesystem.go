package envd

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os/user"
	"path"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/agent-sandbox/agent-sandbox/pkg/proto/envd/filesystem"
	"github.com/agent-sandbox/agent-sandbox/pkg/proto/envd/filesystem/envdfilesystemconnect"
)

// maxListDepth bounds ListDir's depth, so one call cannot walk a whole
// deep tree by asking for depth 2^32-1.
const maxListDepth = 64

// filesystemService implements envd's filesystem.Filesystem on the root.
type filesystemService struct {
	envdfilesystemconnect.UnimplementedFilesystemHandler
	s *Service
}

var _ envdfilesystemconnect.FilesystemHandler = (*filesystemService)(nil)

// clientPath renders a root-relative path the way clients see it: the
// root is "/".
func clientPath(rel string) string {
	if rel == "." || rel == "" {
		return "/"
	}
	return "/" + strings.TrimPrefix(rel, "/")
}

// fsErr maps err onto a Connect error naming the client's path.
func fsErr(p string, err error) error {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return err
	}
	mapped := toConnect(err).(*connect.Error)
	return connect.NewError(mapped.Code(), fmt.Errorf("path %q: %s", p, mapped.Message()))
}

// entry describes rel (not following a final symlink).
func (s *Service) entry(rel string) (*pb.EntryInfo, error) {
	fi, err := s.cfg.FS.Lstat(rel)
	if err != nil {
		return nil, err
	}
	return s.entryOf(rel, fi), nil
}

func (s *Service) entryOf(rel string, fi fs.FileInfo) *pb.EntryInfo {
	p := clientPath(rel)
	e := &pb.EntryInfo{
		Name:         path.Base(p),
		Type:         pb.FileType_FILE_TYPE_FILE,
		Path:         p,
		Size:         fi.Size(),
		Mode:         uint32(fi.Mode()),
		Permissions:  fi.Mode().String(),
		ModifiedTime: timestamppb.New(fi.ModTime()),
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		e.Type = pb.FileType_FILE_TYPE_SYMLINK
		if target, err := s.cfg.FS.Readlink(rel); err == nil {
			e.SymlinkTarget = &target
		}
	case fi.IsDir():
		e.Type = pb.FileType_FILE_TYPE_DIRECTORY
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		e.Owner, e.Group = userName(st.Uid), groupName(st.Gid)
	}
	return e
}

// Owner and group names, looked up once per id: a listing of many files
// would otherwise read /etc/passwd and /etc/group for each.
var userNames, groupNames sync.Map // uint32 -> string

func userName(uid uint32) string {
	if v, ok := userNames.Load(uid); ok {
		return v.(string)
	}
	name := strconv.FormatUint(uint64(uid), 10)
	if u, err := user.LookupId(name); err == nil {
		name = u.Username
	}
	userNames.Store(uid, name)
	return name
}

func groupName(gid uint32) string {
	if v, ok := groupNames.Load(gid); ok {
		return v.(string)
	}
	name := strconv.FormatUint(uint64(gid), 10)
	if g, err := user.LookupGroupId(name); err == nil {
		name = g.Name
	}
	groupNames.Store(gid, name)
	return name
}

// Stat describes a path; a symlink is described itself.
func (f *filesystemService) Stat(_ context.Context, req *connect.Request[pb.StatRequest]) (*connect.Response[pb.StatResponse], error) {
	rel, err := f.s.cfg.FS.Resolve(req.Msg.GetPath(), false)
	if err != nil {
		return nil, fsErr(req.Msg.GetPath(), err)
	}
	e, err := f.s.entry(rel)
	if err != nil {
		return nil, fsErr(req.Msg.GetPath(), err)
	}
	return connect.NewResponse(&pb.StatResponse{Entry: e}), nil
}

// MakeDir creates a directory and its parents; AlreadyExists when it is
// there already.
func (f *filesystemService) MakeDir(_ context.Context, req *connect.Request[pb.MakeDirRequest]) (*connect.Response[pb.MakeDirResponse], error) {
	p := req.Msg.GetPath()
	rel, err := f.s.cfg.FS.Resolve(p, true)
	if err != nil {
		return nil, fsErr(p, err)
	}
	if fi, err := f.s.cfg.FS.Stat(rel); err == nil {
		if fi.IsDir() {
			return nil, connect.NewError(connect.CodeAlreadyExists, fmt.Errorf("directory %q already exists", p))
		}
		return nil, invalidf("path %q exists and is not a directory", p)
	}
	if err := f.s.cfg.FS.MkdirParents(rel); err != nil {
		return nil, fsErr(p, err)
	}
	e, err := f.s.entry(rel)
	if err != nil {
		return nil, fsErr(p, err)
	}
	return connect.NewResponse(&pb.MakeDirResponse{Entry: e}), nil
}

// Move renames source to destination, creating destination's parents.
// Links are moved, not followed.
func (f *filesystemService) Move(_ context.Context, req *connect.Request[pb.MoveRequest]) (*connect.Response[pb.MoveResponse], error) {
	src, dst := req.Msg.GetSource(), req.Msg.GetDestination()
	from, err := f.s.cfg.FS.Resolve(src, false)
	if err != nil {
		return nil, fsErr(src, err)
	}
	to, err := f.s.cfg.FS.Resolve(dst, false)
	if err != nil {
		return nil, fsErr(dst, err)
	}
	if from == "." || to == "." {
		return nil, connect.NewError(connect.CodePermissionDenied, errors.New("the sandbox root cannot be moved or replaced"))
	}
	if _, err := f.s.cfg.FS.Lstat(from); err != nil {
		return nil, fsErr(src, err)
	}
	if err := f.s.cfg.FS.MkdirParents(path.Dir(to)); err != nil {
		return nil, fsErr(dst, err)
	}
	if err := f.s.cfg.FS.Rename(from, to); err != nil {
		return nil, fsErr(dst, err)
	}
	e, err := f.s.entry(to)
	if err != nil {
		return nil, fsErr(dst, err)
	}
	return connect.NewResponse(&pb.MoveResponse{Entry: e}), nil
}

// Remove deletes a file, a link or a directory with its content. The root
// itself is refused.
func (f *filesystemService) Remove(_ context.Context, req *connect.Request[pb.RemoveRequest]) (*connect.Response[pb.RemoveResponse], error) {
	p := req.Msg.GetPath()
	rel, err := f.s.cfg.FS.Resolve(p, false)
	if err != nil {
		return nil, fsErr(p, err)
	}
	if rel == "." {
		return nil, connect.NewError(connect.CodePermissionDenied, errors.New("the sandbox root cannot be removed"))
	}
	if _, err := f.s.cfg.FS.Lstat(rel); err != nil {
		return nil, fsErr(p, err)
	}
	if err := f.s.cfg.FS.RemoveAll(rel); err != nil {
		return nil, fsErr(p, err)
	}
	return connect.NewResponse(&pb.RemoveResponse{}), nil
}

// ListDir lists a directory to the given depth (default 1: its entries).
// Symlinked directories are listed, not descended into.
func (f *filesystemService) ListDir(_ context.Context, req *connect.Request[pb.ListDirRequest]) (*connect.Response[pb.ListDirResponse], error) {
	p := req.Msg.GetPath()
	depth := int(min(req.Msg.GetDepth(), maxListDepth))
	if depth == 0 {
		depth = 1
	}
	rel, err := f.s.cfg.FS.Resolve(p, true)
	if err != nil {
		return nil, fsErr(p, err)
	}
	fi, err := f.s.cfg.FS.Stat(rel)
	if err != nil {
		return nil, fsErr(p, err)
	}
	if !fi.IsDir() {
		return nil, invalidf("path %q is not a directory", p)
	}
	entries := []*pb.EntryInfo{}
	base := strings.Count(rel, "/") + 1
	if rel == "." {
		base = 0
	}
	err = fs.WalkDir(f.s.cfg.FS.FS(), rel, func(q string, d fs.DirEntry, err error) error {
		if q == rel {
			return err
		}
		if err != nil {
			return nil // an unreadable subdirectory: list what we can
		}
		info, err := d.Info()
		if err != nil {
			return nil // vanished meanwhile
		}
		entries = append(entries, f.s.entryOf(q, info))
		if d.IsDir() && strings.Count(q, "/")+1-base >= depth {
			return fs.SkipDir
		}
		return nil
	})
	if err != nil {
		return nil, fsErr(p, err)
	}
	return connect.NewResponse(&pb.ListDirResponse{Entries: entries}), nil
}
