package process

import (
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// DrainGrace is how long output is still read after the command exited. A
// grandchild left running in the background may hold the pipes open forever;
// we stop waiting for it rather than hang the request.
const DrainGrace = time.Second

var readBufPool = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// pumpState is what the output readers share with the drain logic.
type pumpState struct {
	busy     atomic.Int32 // readers handing a chunk to emit
	lastData atomic.Int64 // when a reader last got data (UnixNano)
}

// PumpOutput reads every output stream in its own goroutine and hands each
// chunk to emit (which must copy it to keep it). It returns once all streams
// reached EOF, or, after the command exited, once they stayed idle for
// DrainGrace.
func (c *Command) PumpOutput(emit func(stream int, p []byte)) {
	var wg sync.WaitGroup
	var st pumpState
	for i, f := range c.outputs {
		wg.Go(func() { c.readOutput(i, f, emit, &st) })
	}
	all := make(chan struct{})
	go func() { wg.Wait(); close(all) }()
	select {
	case <-all:
	case <-c.exited:
		c.drain(all, &st)
	}
	if c.pty != nil {
		// Closing the master hangs up the terminal and SIGHUPs the session:
		// a program that closes its stdio before exiting (coreutils do, in
		// atexit) would be reported as killed by SIGHUP.
		<-c.exited
	}
	for _, f := range c.outputs {
		_ = f.Close() // read to the end or cut: nothing more to read
	}
	c.stdinMu.Lock()
	if c.stdin != nil && !c.stdinClosed && c.pty == nil {
		c.stdinClosed = true
		_ = c.stdin.Close()
	}
	c.stdinMu.Unlock()
}

// readOutput reads one stream until it ends.
func (c *Command) readOutput(i int, f *os.File, emit func(int, []byte), st *pumpState) {
	bp := readBufPool.Get().(*[]byte)
	defer readBufPool.Put(bp)
	buf := *bp
	retried := false
	for {
		n, err := f.Read(buf)
		if n > 0 {
			retried = false
			st.busy.Add(1)
			emit(i, buf[:n]) // may block on a slow client
			st.lastData.Store(time.Now().UnixNano())
			st.busy.Add(-1)
		}
		if err != nil {
			// A PTY master can report EIO for a closed terminal while
			// the last bytes written before the close are still being
			// handed over; one more read returns them (or EIO again).
			if c.pty != nil && !retried && errors.Is(err, syscall.EIO) {
				retried = true
				continue
			}
			return
		}
	}
}

// drain waits, after the command exited, until the readers are done (all
// is closed). Output still flowing is drained in full; only a pipe that
// stays idle for DrainGrace is cut.
func (c *Command) drain(all <-chan struct{}, st *pumpState) {
	t := time.NewTimer(DrainGrace)
	defer t.Stop()
	for {
		select {
		case <-all:
			return
		case <-t.C:
		}
		idle := time.Since(time.Unix(0, st.lastData.Load()))
		if st.busy.Load() == 0 && idle >= DrainGrace {
			for _, f := range c.outputs {
				_ = f.Close() // unblocks the readers: the files are pollable
			}
			<-all
			return
		}
		t.Reset(max(DrainGrace-idle, 10*time.Millisecond))
	}
}
