package devcluster

import (
	"io"

	"github.com/agent-sandbox/agent-sandbox/internal/logging"
	"github.com/agent-sandbox/agent-sandbox/internal/logging/kubelog"
)

// QuietLibraryLogs sends client-go's and controller-runtime's logs to w at warning level and
// above. Without a logger, controller-runtime's first log line more than 30 s into the process
// prints a goroutine stack ("log.SetLogger(...) was never called"); the line is the API server's
// info-level warning about Cilium's CRDs (`unrecognized format "idn-hostname"`), which is no
// concern of whoever brings the cluster up, so it is dropped with the rest of their chatter.
func QuietLibraryLogs(w io.Writer) {
	o := logging.NewOptions(logging.FormatText)
	_ = o.LevelFlag().Set("warn")
	kubelog.Setup(o, w)
}
