package sandboxd

import (
	"context"
	"time"

	"github.com/agent-sandbox/agent-sandbox/pkg/sandboxd/wire"
)

// warmUpTimeout bounds the warm-up: an image whose shell hangs must not keep the daemon from
// listening (and its pod from becoming ready) for long. A variable for the tests.
var warmUpTimeout = 2 * time.Second

// warmUp runs one trivial command (Shell -c :) the way a client's command runs, before the
// daemon listens. A warm pool member is then warm for its first command too: under gVisor the
// first command a fresh daemon ran took 15–20 ms longer than the ones after it, and one
// command before listening takes that away (docs/bench.md). Clients never see it: it is not
// counted in the metrics and is not activity. A shell that is missing or fails changes nothing.
func (s *Server) warmUp(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, warmUpTimeout)
	defer cancel()
	begin := time.Now()
	sp, err := s.runner.BuildSpec(ctx, &wire.ExecRequest{Argv: []string{s.cfg.Shell, "-c", ":"}}, warmUpTimeout)
	if err != nil {
		s.log.Debug("warm-up skipped", "err", err)
		return
	}
	res := s.runner.Run(ctx, sp, false, func(int, []byte) {}, nil)
	s.log.Debug("warmed up", "command", sp.Argv, "exitCode", res.ExitCode, "took", time.Since(begin))
}
