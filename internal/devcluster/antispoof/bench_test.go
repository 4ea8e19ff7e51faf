package antispoof

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os/exec"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/vishvananda/netns"
)

// BenchmarkAFirstRequestAcrossTheBridge is what the anti-spoofing rules cost the first command
// through the router: a new TCP connection from a client pod to the router pod across the bridge,
// one HTTP request and its answer, then close; without and with the plugin on both ports, in
// one process so that the two alternate on the same machine (-count). It reports p50 and p99.
//
//	go test -run '^$' -bench BenchmarkAFirstRequestAcrossTheBridge -count 6 ./internal/devcluster/antispoof/
func BenchmarkAFirstRequestAcrossTheBridge(b *testing.B) {
	if testing.Short() {
		b.Skip("builds a lab network")
	}
	needRoot(b)
	l := newLab(b)
	addr := serveIn(b, l.router)
	plugin := buildPlugin(b)
	tableBefore := tableExists(b)
	b.Cleanup(func() {
		for _, p := range []labPod{l.router, l.victim} {
			_ = runPlugin(plugin, "DEL", p, nil)
		}
		if !tableBefore {
			_ = exec.Command("nft", "delete", "table", Family, Table).Run()
		}
	})
	for _, with := range []bool{false, true} {
		name := "without the plugin"
		if with {
			name = "with the plugin"
			for _, p := range []labPod{l.router, l.victim} {
				if err := runPlugin(plugin, "ADD", p, l.prevResult(p)); err != nil {
					b.Fatalf("ADD: %v", err)
				}
			}
		}
		b.Run(name, func(b *testing.B) { requestsFrom(b, l.victim, addr) })
	}
}

// serveIn answers every HTTP request with 200 from a listener in the pod's namespace.
func serveIn(b testing.TB, p labPod) netip.AddrPort {
	ln, err := inNetnsListen(p.nsPath(), netip.AddrPortFrom(p.ip, 8080))
	if err != nil {
		b.Fatalf("listening in %s: %v", p.ns, err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	b.Cleanup(func() { _ = srv.Close() })
	return netip.AddrPortFrom(p.ip, 8080)
}

func inNetnsListen(path string, at netip.AddrPort) (net.Listener, error) {
	type result struct {
		ln  net.Listener
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		if err := enterNetns(path); err != nil {
			done <- result{err: err}
			return
		}
		ln, err := net.Listen("tcp", at.String())
		done <- result{ln, err}
	}()
	r := <-done
	return r.ln, r.err
}

func enterNetns(path string) error {
	h, err := netns.GetFromPath(path)
	if err != nil {
		return err
	}
	defer h.Close()
	return netns.Set(h)
}

// requestsFrom makes b.N first requests from the pod's namespace, each on a new connection.
func requestsFrom(b *testing.B, p labPod, addr netip.AddrPort) {
	errs := make(chan error, 1)
	took := make([]time.Duration, 0, b.N)
	go func() {
		runtime.LockOSThread()
		if err := enterNetns(p.nsPath()); err != nil {
			errs <- err
			return
		}
		req := []byte(fmt.Sprintf("GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", addr))
		b.ResetTimer()
		for range b.N {
			start := time.Now()
			if err := oneRequest(addr, req); err != nil {
				errs <- err
				return
			}
			took = append(took, time.Since(start))
		}
		b.StopTimer()
		errs <- nil
	}()
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(took[len(took)*99/100].Microseconds()), "p99-µs")
}

func oneRequest(addr netip.AddrPort, req []byte) error {
	conn, err := net.DialTimeout("tcp", addr.String(), 5*time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.Write(req); err != nil {
		return err
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return resp.Body.Close()
}
