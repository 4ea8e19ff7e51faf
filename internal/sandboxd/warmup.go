package sandboxd

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/agent-sandbox/agent-sandbox/pkg/sandboxd/wire"
)

// warmUpTimeout bounds the warm-up: an image whose shell hangs must not keep the daemon from
// listening (and its pod from becoming ready) for long. A variable for the tests.
var warmUpTimeout = 2 * time.Second

// warmUp sends one trivial command (Shell -c :) through the exec endpoint's handler, in the
// process, before the daemon listens. A warm pool member is then warm for its first command
// too: under gVisor the first command a fresh daemon ran took about 12 ms longer than the ones
// after it (cold pages and the sentry's caches along the path: request decoding, the working
// directory, process start, output, the answer), and this takes most of that away
// (docs/bench-runtimes.md). Clients never see it: it happens before anyone can connect, it is not
// counted in the metrics and it is not activity. A shell that is missing or fails changes
// nothing.
func (s *Server) warmUp(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, warmUpTimeout)
	defer cancel()
	begin := time.Now()
	body, err := json.Marshal(wire.ExecRequest{Argv: []string{s.cfg.Shell, "-c", ":"}, TimeoutSeconds: warmUpTimeout.Seconds()})
	if err != nil {
		return
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "/v1/exec", bytes.NewReader(body))
	if err != nil {
		return
	}
	req.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder() // the answer to ":" is a few bytes; only its status is logged
	s.warming.Store(true)
	defer s.warming.Store(false)
	s.exec.Exec(w, req)
	s.log.Debug("warmed up", "status", w.Code, "took", time.Since(begin))
}
