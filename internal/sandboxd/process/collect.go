package process

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"github.com/agent-sandbox/agent-sandbox/pkg/sandboxd/wire"
)

// cappedBuffer keeps the first max bytes written and remembers whether more
// arrived.
type cappedBuffer struct {
	max       int64
	buf       bytes.Buffer
	truncated bool
}

func (b *cappedBuffer) write(p []byte) {
	room := b.max - int64(b.buf.Len())
	if int64(len(p)) > room {
		p = p[:max(room, 0)]
		b.truncated = true
	}
	b.buf.Write(p)
}

// Collect runs sp to completion, collects its output up to sp.MaxOutput per
// stream, and observes the outcome under mode.
func (r *Runner) Collect(ctx context.Context, sp *Spec, mode string) (wire.ExecResult, Result) {
	out := [2]*cappedBuffer{{max: sp.MaxOutput}, {max: sp.MaxOutput}}
	res := r.Run(ctx, sp, false, func(i int, p []byte) { out[i].write(p) }, nil)
	r.Observe(mode, res)
	return wire.ExecResult{
		Stdout:          out[0].buf.String(),
		Stderr:          out[1].buf.String(),
		ExitCode:        res.ExitCode,
		TimedOut:        res.TimedOut,
		StdoutTruncated: out[0].truncated,
		StderrTruncated: out[1].truncated,
		Truncated:       out[0].truncated || out[1].truncated,
		DurationMs:      res.Duration.Milliseconds(),
	}, res
}

// NoteTruncation is for APIs that have no field to say that output was cut
// (legacy /execute, gRPC Execute): for each stream of out over the cap it
// appends a line to stderr, and makes a zero exit code 1, so that output is
// never cut silently.
func (r *Runner) NoteTruncation(out wire.ExecResult, stderr string, exitCode int) (string, int) {
	for _, c := range []struct {
		name string
		cut  bool
	}{{"stdout", out.StdoutTruncated}, {"stderr", out.StderrTruncated}} {
		if !c.cut {
			continue
		}
		stderr = AppendLine(stderr, r.truncationNote(c.name))
		if exitCode == 0 {
			exitCode = 1
		}
	}
	return stderr, exitCode
}

// truncationNote is the stderr line of an answer whose stream went over the
// output cap.
func (r *Runner) truncationNote(stream string) string {
	return fmt.Sprintf("sandboxd: OUTPUT TRUNCATED: %s exceeded the output cap of %d bytes (sandboxd --max-output); only the first %d bytes are returned",
		stream, r.cfg.MaxOutput, r.cfg.MaxOutput)
}

// AppendLine adds line to s on a line of its own.
func AppendLine(s, line string) string {
	if s != "" && !strings.HasSuffix(s, "\n") {
		s += "\n"
	}
	return s + line + "\n"
}
