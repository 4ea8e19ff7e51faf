package process

import (
	"os"
	"os/signal"
	"sync"
	"syscall"
)

var defaultSignalsOnce sync.Once

// childrenGetDefaultSignals makes the commands this process starts begin with the default
// action for SIGHUP and SIGINT even when this process was started with them ignored (under
// nohup, or a supervisor that ignores them). Go keeps an inherited SIG_IGN for these two and
// exec passes it on, so a command's hang-up or interrupt would do nothing, and a shell cannot
// undo it. A signal Go handles is reset to its default by exec; this process goes on
// ignoring it (the channel is never read).
func childrenGetDefaultSignals() {
	defaultSignalsOnce.Do(func() {
		for _, sig := range []os.Signal{syscall.SIGHUP, syscall.SIGINT} {
			if signal.Ignored(sig) {
				signal.Notify(make(chan os.Signal, 1), sig)
			}
		}
	})
}
