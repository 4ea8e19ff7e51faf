package conversion_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/agent-sandbox/agent-sandbox/internal/controller/conversion"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

// TestTheTwoProcessesOfAPodShareTheWebhookPort is why a controller pod survives the loss of
// either of its processes without a refused conversion call: both bind the webhook's port, and
// once one of them is gone every new connection reaches the other.
func TestTheTwoProcessesOfAPodShareTheWebhookPort(t *testing.T) {
	cases := []struct {
		name    string
		stopped int // which of the two servers stops
	}{
		{"the controller stops, the webhook container answers", 0},
		{"the webhook container stops, the controller answers", 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeIssuedCerts(t, dir, "localhost")
			port := freePort(t)
			var stop [2]func() error // cancels server i and returns what its Start returned
			for i := range 2 {
				mux := http.NewServeMux()
				mux.HandleFunc(conversion.Path, func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, i) })
				srv := conversion.NewServer("127.0.0.1", port, dir, "", "", mux)
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error, 1)
				go func() { done <- srv.Start(ctx) }()
				stop[i] = sync.OnceValue(func() error { cancel(); return <-done })
				t.Cleanup(func() { _ = stop[i]() })
				testwrap.Wait{Timeout: 10 * time.Second, Interval: 10 * time.Millisecond}.Eventually(t,
					"server "+strconv.Itoa(i)+" serving", func() error { return srv.Ready(nil) })
			}
			if err := stop[tc.stopped](); err != nil {
				t.Fatalf("server %d stopped with %v", tc.stopped, err)
			}
			survivor := strconv.Itoa(1 - tc.stopped)
			for n := range 20 {
				// A new connection each time, as after a peer's death.
				c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // a test certificate
				resp, err := c.Post("https://127.0.0.1:"+strconv.Itoa(port)+conversion.Path, "application/json", nil)
				if err != nil {
					t.Fatalf("request %d after server %d stopped: %v; want server %s to answer", n, tc.stopped, err, survivor)
				}
				body, _ := io.ReadAll(resp.Body)
				_ = resp.Body.Close()
				c.CloseIdleConnections()
				if string(body) != survivor {
					t.Fatalf("request %d answered by server %q, want %s", n, body, survivor)
				}
			}
		})
	}
}
