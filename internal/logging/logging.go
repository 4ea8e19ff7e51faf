// Package logging is the one logging setup of every binary: log/slog is the backend (JSON or
// text, from the standard library), and the verbosity follows Kubernetes components: -v=N
// shows logr's V(N) lines and below. Binaries that talk to the API server route client-go's
// klog and controller-runtime's logr into the same handler with package kubelog; sandboxd,
// which runs inside user images, links neither. See docs/logging.md.
package logging

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"

	"github.com/go-logr/logr"
)

// The output formats of --logging-format.
const (
	FormatJSON = "json"
	FormatText = "text"
)

// Options are the logging flags every binary shares. The zero value is not ready: use
// NewOptions.
type Options struct {
	level  *slog.LevelVar
	format string
}

// NewOptions returns verbosity 0 (info and above) in the given format (FormatJSON for servers,
// whose logs are collected; FormatText for commands people read).
func NewOptions(format string) *Options {
	return &Options{level: new(slog.LevelVar), format: format}
}

// BindFlags registers -v and --logging-format, the names Kubernetes components use, and
// --log-level / --log-format, the names the router and sandboxd had, kept as aliases.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	fs.Var(verbosityFlag{o.level}, "v", "Log verbosity: -v=N also logs the V(N) lines (2: every reconcile decision, 4: debug, 5 and up: client-go's request traces).")
	fs.Var(formatFlag{&o.format}, "logging-format", "Log format: json or text.")
	fs.Var(o.LevelFlag(), "log-level", "Deprecated, use -v: debug (= -v=4), info, warn or error, or a number N (= -v=N).")
	fs.Var(formatFlag{&o.format}, "log-format", "Deprecated alias of --logging-format.")
}

// LevelFlag parses level names (debug, info, warn, error) and numbers (N = -v=N), for the
// deprecated level flags (--log-level, the controller's --zap-log-level).
func (o *Options) LevelFlag() flag.Value { return levelFlag{o.level} }

// Format is json or text.
func (o *Options) Format() string { return o.format }

// Verbosity is the N of -v=N (0 when a level above info was chosen).
func (o *Options) Verbosity() int { return max(0, int(slog.LevelInfo-o.level.Level())) }

// Handler writes records at or above the chosen level to w.
func (o *Options) Handler(w io.Writer) slog.Handler {
	opts := &slog.HandlerOptions{Level: o.level}
	if o.format == FormatText {
		return verbosityHandler{slog.NewTextHandler(w, opts)}
	}
	return verbosityHandler{slog.NewJSONHandler(w, opts)}
}

// Setup builds the process logger on w and makes it slog's (and the log package's) default.
func (o *Options) Setup(w io.Writer) *slog.Logger {
	log := slog.New(o.Handler(w))
	slog.SetDefault(log)
	return log
}

// IntoContext returns ctx carrying log, for FromContext further down the call chain (and for
// controller-runtime's and klog's FromContext, which read the same key).
func IntoContext(ctx context.Context, log *slog.Logger) context.Context {
	return logr.NewContextWithSlogLogger(ctx, log)
}

// FromContext returns the logger IntoContext (or logr.NewContext) put in ctx, else fallback.
func FromContext(ctx context.Context, fallback *slog.Logger) *slog.Logger {
	if log := logr.FromContextAsSlogLogger(ctx); log != nil {
		return log
	}
	return fallback
}

// verbosityHandler writes logr's V(N) lines (slog level -N, slog.LevelDebug is V(4)) as
// level INFO with "v": N, the way Kubernetes components' JSON logs do, instead of slog's
// "DEBUG+2".
type verbosityHandler struct{ slog.Handler }

func (h verbosityHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level < slog.LevelInfo {
		r.AddAttrs(slog.Int("v", int(slog.LevelInfo-r.Level)))
		r.Level = slog.LevelInfo
	}
	return h.Handler.Handle(ctx, r)
}

func (h verbosityHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return verbosityHandler{h.Handler.WithAttrs(attrs)}
}

func (h verbosityHandler) WithGroup(name string) slog.Handler {
	return verbosityHandler{h.Handler.WithGroup(name)}
}

// verbosityFlag is -v=N: slog level -N, logr's V(N).
type verbosityFlag struct{ level *slog.LevelVar }

func (f verbosityFlag) String() string {
	if f.level == nil {
		return "0"
	}
	return strconv.Itoa(max(0, int(slog.LevelInfo-f.level.Level())))
}

func (f verbosityFlag) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return fmt.Errorf("want a number 0 or above, not %q", s)
	}
	f.level.Set(slog.LevelInfo - slog.Level(n))
	return nil
}

// levelFlag is a level name or a verbosity number.
type levelFlag struct{ level *slog.LevelVar }

func (f levelFlag) String() string {
	if f.level == nil {
		return "info"
	}
	return strings.ToLower(f.level.Level().String())
}

func (f levelFlag) Set(s string) error {
	if n, err := strconv.Atoi(s); err == nil {
		return verbosityFlag(f).Set(strconv.Itoa(n))
	}
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return fmt.Errorf("want debug, info, warn, error or a number, not %q", s)
	}
	f.level.Set(l)
	return nil
}

// formatFlag is json or text.
type formatFlag struct{ format *string }

func (f formatFlag) String() string {
	if f.format == nil {
		return ""
	}
	return *f.format
}

func (f formatFlag) Set(s string) error {
	if s != FormatJSON && s != FormatText {
		return fmt.Errorf("want json or text, not %q", s)
	}
	*f.format = s
	return nil
}
