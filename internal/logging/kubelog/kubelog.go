// Package kubelog routes client-go's klog and controller-runtime's logr into the process's
// slog handler, so that a binary talking to the API server writes one format at one verbosity.
package kubelog

import (
	"flag"
	"io"
	"log/slog"
	"strconv"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/agent-sandbox/agent-sandbox/internal/logging"
)

// Setup is logging's Setup plus klog and controller-runtime: their V(N) lines appear at -v=N.
func Setup(o *logging.Options, w io.Writer) *slog.Logger {
	log := o.Setup(w)
	// klog checks its own -v before it hands a klog.V(N) line to the logger.
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	_ = fs.Set("v", strconv.Itoa(o.Verbosity()))
	klog.SetSlogLogger(log)
	ctrllog.SetLogger(logr.FromSlogHandler(log.Handler()))
	return log
}
