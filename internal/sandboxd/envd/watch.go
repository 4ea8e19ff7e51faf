package envd

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"path/filepath"
	"sync"
	"time"

	"connectrpc.com/connect"
	"github.com/fsnotify/fsnotify"

	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/files"
	pb "github.com/agent-sandbox/agent-sandbox/pkg/proto/envd/filesystem"
)

const (
	// maxPolledWatchers bounds the watchers made with CreateWatcher, each
	// holding inotify watches until removed.
	maxPolledWatchers = 128
	// maxPendingEvents bounds the events a polled watcher keeps between two
	// GetWatcherEvents; older ones are dropped first.
	maxPendingEvents = 10000
)

// watchOps maps fsnotify's operations onto envd's event types.
var watchOps = []struct {
	op fsnotify.Op
	t  pb.EventType
}{
	{fsnotify.Create, pb.EventType_EVENT_TYPE_CREATE},
	{fsnotify.Write, pb.EventType_EVENT_TYPE_WRITE},
	{fsnotify.Remove, pb.EventType_EVENT_TYPE_REMOVE},
	{fsnotify.Rename, pb.EventType_EVENT_TYPE_RENAME},
	{fsnotify.Chmod, pb.EventType_EVENT_TYPE_CHMOD},
}

// dirWatch watches one directory (and, when recursive, the ones below it).
type dirWatch struct {
	s            *Service
	w            *fsnotify.Watcher
	dir          string // absolute
	recursive    bool
	includeEntry bool
}

// openWatch starts watching p, which must be a directory under the root.
// Network mounts need no special case: the root is the sandbox's own
// volume, so allowNetworkMounts is accepted and changes nothing.
func (s *Service) openWatch(p string, recursive, includeEntry bool) (*dirWatch, error) {
	rel, err := s.cfg.FS.Resolve(p, true)
	if err != nil {
		return nil, fsErr(p, err)
	}
	fi, err := s.cfg.FS.Stat(rel)
	if err != nil {
		return nil, fsErr(p, err)
	}
	if !fi.IsDir() {
		return nil, invalidf("path %q is not a directory", p)
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, connect.NewError(connect.CodeInternal, err)
	}
	dir := filepath.Join(s.cfg.FS.Dir(), rel)
	if err := files.AddWatches(w, dir, recursive); err != nil {
		_ = w.Close()
		return nil, fsErr(p, err)
	}
	return &dirWatch{s: s, w: w, dir: dir, recursive: recursive, includeEntry: includeEntry}, nil
}

func (d *dirWatch) close() { _ = d.w.Close() }

// events turns one fsnotify event into envd's, named relative to the
// watched directory; new directories join a recursive watch.
func (d *dirWatch) events(ev fsnotify.Event) []*pb.FilesystemEvent {
	name, err := filepath.Rel(d.dir, ev.Name)
	if err != nil {
		return nil
	}
	rel := d.s.cfg.FS.RelOf(ev.Name)
	if d.recursive && ev.Has(fsnotify.Create) {
		if fi, err := d.s.cfg.FS.Lstat(rel); err == nil && fi.IsDir() {
			_ = files.AddWatches(d.w, ev.Name, true) // it may have vanished already
		}
	}
	var out []*pb.FilesystemEvent
	for _, o := range watchOps {
		if !ev.Has(o.op) {
			continue
		}
		fe := &pb.FilesystemEvent{Name: filepath.ToSlash(name), Type: o.t}
		if d.includeEntry && o.op != fsnotify.Remove && o.op != fsnotify.Rename {
			if e, err := d.s.entry(rel); err == nil {
				fe.Entry = e
			}
		}
		out = append(out, fe)
	}
	return out
}

// WatchDir streams a start event once the watch is in place, then events
// (and keepalives when quiet) until the client leaves.
func (f *filesystemService) WatchDir(ctx context.Context, req *connect.Request[pb.WatchDirRequest], stream *connect.ServerStream[pb.WatchDirResponse]) error {
	d, err := f.s.openWatch(req.Msg.GetPath(), req.Msg.GetRecursive(), req.Msg.GetIncludeEntry())
	if err != nil {
		return err
	}
	defer d.close()
	if err := stream.Send(&pb.WatchDirResponse{Event: &pb.WatchDirResponse_Start{Start: &pb.WatchDirResponse_StartEvent{}}}); err != nil {
		return err
	}
	every := keepaliveInterval(req.Header())
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
			if err := stream.Send(&pb.WatchDirResponse{Event: &pb.WatchDirResponse_Keepalive{Keepalive: &pb.WatchDirResponse_KeepAlive{}}}); err != nil {
				return err
			}
		case ev, ok := <-d.w.Events:
			if !ok {
				return connect.NewError(connect.CodeInternal, errors.New("watch ended"))
			}
			for _, fe := range d.events(ev) {
				if err := stream.Send(&pb.WatchDirResponse{Event: &pb.WatchDirResponse_Filesystem{Filesystem: fe}}); err != nil {
					return err
				}
			}
			tick.Reset(every)
		case err, ok := <-d.w.Errors:
			if !ok {
				return connect.NewError(connect.CodeInternal, errors.New("watch ended"))
			}
			f.s.log.Warn("envd watch error", "error", err)
		}
	}
}

// poller is a watcher whose events wait for GetWatcherEvents.
type poller struct {
	d       *dirWatch
	mu      sync.Mutex
	pending []*pb.FilesystemEvent
	stopped chan struct{}
}

func (p *poller) collect(log func(error)) {
	for {
		select {
		case ev, ok := <-p.d.w.Events:
			if !ok {
				return
			}
			evs := p.d.events(ev)
			p.mu.Lock()
			p.pending = append(p.pending, evs...)
			if over := len(p.pending) - maxPendingEvents; over > 0 {
				p.pending = p.pending[over:]
			}
			p.mu.Unlock()
		case err, ok := <-p.d.w.Errors:
			if !ok {
				return
			}
			log(err)
		case <-p.stopped:
			return
		}
	}
}

// pollers holds the watchers made with CreateWatcher.
type pollers struct {
	mu sync.Mutex
	m  map[string]*poller
}

// CreateWatcher starts a watcher whose events GetWatcherEvents returns.
func (f *filesystemService) CreateWatcher(_ context.Context, req *connect.Request[pb.CreateWatcherRequest]) (*connect.Response[pb.CreateWatcherResponse], error) {
	f.s.pollers.mu.Lock()
	full := len(f.s.pollers.m) >= maxPolledWatchers
	f.s.pollers.mu.Unlock()
	if full {
		return nil, connect.NewError(connect.CodeResourceExhausted, errors.New("too many watchers: remove some with RemoveWatcher"))
	}
	d, err := f.s.openWatch(req.Msg.GetPath(), req.Msg.GetRecursive(), req.Msg.GetIncludeEntry())
	if err != nil {
		return nil, err
	}
	id := randomID()
	p := &poller{d: d, stopped: make(chan struct{})}
	f.s.pollers.mu.Lock()
	f.s.pollers.m[id] = p
	f.s.pollers.mu.Unlock()
	go p.collect(func(err error) { f.s.log.Warn("envd watch error", "error", err) })
	return connect.NewResponse(&pb.CreateWatcherResponse{WatcherId: id}), nil
}

// GetWatcherEvents returns and forgets the events since the last call.
func (f *filesystemService) GetWatcherEvents(_ context.Context, req *connect.Request[pb.GetWatcherEventsRequest]) (*connect.Response[pb.GetWatcherEventsResponse], error) {
	f.s.pollers.mu.Lock()
	p, ok := f.s.pollers.m[req.Msg.GetWatcherId()]
	f.s.pollers.mu.Unlock()
	if !ok {
		return nil, notFoundf("watcher %q not found", req.Msg.GetWatcherId())
	}
	p.mu.Lock()
	evs := p.pending
	p.pending = nil
	p.mu.Unlock()
	return connect.NewResponse(&pb.GetWatcherEventsResponse{Events: evs}), nil
}

// RemoveWatcher stops a watcher.
func (f *filesystemService) RemoveWatcher(_ context.Context, req *connect.Request[pb.RemoveWatcherRequest]) (*connect.Response[pb.RemoveWatcherResponse], error) {
	f.s.pollers.mu.Lock()
	p, ok := f.s.pollers.m[req.Msg.GetWatcherId()]
	delete(f.s.pollers.m, req.Msg.GetWatcherId())
	f.s.pollers.mu.Unlock()
	if !ok {
		return nil, notFoundf("watcher %q not found", req.Msg.GetWatcherId())
	}
	p.stop()
	return connect.NewResponse(&pb.RemoveWatcherResponse{}), nil
}

func (p *poller) stop() {
	close(p.stopped)
	p.d.close()
}

// closeAll stops every polled watcher.
func (ps *pollers) closeAll() {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for id, p := range ps.m {
		p.stop()
		delete(ps.m, id)
	}
}

func randomID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
