package envd_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"connectrpc.com/connect"

	pb "github.com/agent-sandbox/agent-sandbox/pkg/proto/envd/filesystem"
)

type fsEvent struct {
	name string
	typ  pb.EventType
}

func TestWatchDirStreamsEvents(t *testing.T) {
	e := newEnv(t)
	e.write("w/existing.txt", "x")
	e.header.Set("Keepalive-Ping-Interval", "1")
	s, err := e.fs.WatchDir(t.Context(), connect.NewRequest(&pb.WatchDirRequest{Path: "/w", Recursive: true, IncludeEntry: true}))
	if err != nil {
		t.Fatal(err)
	}
	if !s.Receive() || s.Msg().GetStart() == nil {
		t.Fatalf("first message %v (%v), want the start event", s.Msg(), s.Err())
	}
	events := make(chan *pb.WatchDirResponse, 100)
	go func() {
		defer close(events)
		for s.Receive() {
			events <- s.Msg()
		}
	}()
	defer s.Close()
	want := func(ev fsEvent, change func()) *pb.FilesystemEvent {
		t.Helper()
		change()
		deadline := time.After(10 * time.Second)
		for {
			select {
			case m, ok := <-events:
				if !ok {
					t.Fatalf("stream ended before %v: %v", ev, s.Err())
				}
				if f := m.GetFilesystem(); f != nil && f.GetName() == ev.name && f.GetType() == ev.typ {
					return f
				}
			case <-deadline:
				t.Fatalf("no event %v", ev)
			}
		}
	}
	created := want(fsEvent{"new.txt", pb.EventType_EVENT_TYPE_CREATE}, func() { e.write("w/new.txt", "hello") })
	if created.GetEntry().GetPath() != "/w/new.txt" {
		t.Errorf("create event entry %v, want /w/new.txt (include_entry)", created.GetEntry())
	}
	want(fsEvent{"sub", pb.EventType_EVENT_TYPE_CREATE}, func() { _ = os.Mkdir(filepath.Join(e.root, "w/sub"), 0o755) })
	time.Sleep(100 * time.Millisecond) // the new directory joins the watch
	want(fsEvent{"sub/inner.txt", pb.EventType_EVENT_TYPE_CREATE}, func() { e.write("w/sub/inner.txt", "i") })
	removed := want(fsEvent{"existing.txt", pb.EventType_EVENT_TYPE_REMOVE}, func() { _ = os.Remove(filepath.Join(e.root, "w/existing.txt")) })
	if removed.Entry != nil {
		t.Errorf("remove event carries an entry %v, want none", removed.GetEntry())
	}
	// Quiet now: a keepalive within the interval.
	deadline := time.After(5 * time.Second)
	for {
		select {
		case m := <-events:
			if m.GetKeepalive() != nil {
				return
			}
		case <-deadline:
			t.Fatal("no keepalive on a quiet watch")
		}
	}
}

func TestPolledWatcher(t *testing.T) {
	e := newEnv(t)
	e.write("p/.keep", "")
	cw, err := e.fs.CreateWatcher(t.Context(), connect.NewRequest(&pb.CreateWatcherRequest{Path: "/p"}))
	if err != nil {
		t.Fatal(err)
	}
	id := cw.Msg.GetWatcherId()
	e.write("p/a.txt", "a")
	var got []*pb.FilesystemEvent
	eventually(t, "a create event for a.txt", func() bool {
		ev, err := e.fs.GetWatcherEvents(t.Context(), connect.NewRequest(&pb.GetWatcherEventsRequest{WatcherId: id}))
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ev.Msg.GetEvents()...)
		for _, f := range got {
			if f.GetName() == "a.txt" && f.GetType() == pb.EventType_EVENT_TYPE_CREATE {
				return true
			}
		}
		return false
	})
	ev, err := e.fs.GetWatcherEvents(t.Context(), connect.NewRequest(&pb.GetWatcherEventsRequest{WatcherId: id}))
	if err != nil || len(ev.Msg.GetEvents()) > 0 && ev.Msg.GetEvents()[0].GetType() == pb.EventType_EVENT_TYPE_CREATE && ev.Msg.GetEvents()[0].GetName() == "a.txt" {
		t.Fatalf("events were not forgotten once returned: %v %v", ev.Msg.GetEvents(), err)
	}
	if _, err := e.fs.RemoveWatcher(t.Context(), connect.NewRequest(&pb.RemoveWatcherRequest{WatcherId: id})); err != nil {
		t.Fatal(err)
	}
	_, err = e.fs.GetWatcherEvents(t.Context(), connect.NewRequest(&pb.GetWatcherEventsRequest{WatcherId: id}))
	wantCode(t, "events of a removed watcher", err, connect.CodeNotFound)
	_, err = e.fs.RemoveWatcher(t.Context(), connect.NewRequest(&pb.RemoveWatcherRequest{WatcherId: id}))
	wantCode(t, "removing twice", err, connect.CodeNotFound)
}
