// Command workload is what the snapshot lab runs inside a gVisor sandbox: a process whose state
// lives in memory (a counter, a token, a filled buffer), in open files (on the rootfs overlay and
// on a bind mount), in a child process, in a TCP listener and in an established TCP connection.
// `workload serve` holds that state; `workload probe [TOKEN]` (run with `ctr task exec` in the
// same sandbox) reads it back as JSON, after storing TOKEN when one is given. Comparing the probe
// before a checkpoint with the probe after a restore says what survived.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/snapshotlab/report"
)

const (
	apiAddr  = "127.0.0.1:7000" // the probe's listener
	echoAddr = "127.0.0.1:7001" // the far end of the connection held open from start
)

// state is everything serve holds.
type state struct {
	mu        sync.Mutex
	counter   atomic.Int64
	token     string
	buf       []byte
	bufCRC    uint32
	openFile  *os.File
	bindFile  *os.File
	held      net.Conn
	heldR     *bufio.Reader
	child     *exec.Cmd
	bindDir   string
	rootfsDir string
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: workload serve|probe [TOKEN]|sleep")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve()
	case "probe":
		err = probe(os.Args[2:])
	case "sleep":
		// Not select{}: a Go program whose goroutines all block exits with a deadlock error.
		for {
			time.Sleep(time.Hour)
		}
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "workload:", err)
		os.Exit(1)
	}
}

func serve() error {
	mib, err := strconv.Atoi(envOr("LAB_MIB", "16"))
	if err != nil {
		return fmt.Errorf("LAB_MIB: %w", err)
	}
	s := &state{rootfsDir: envOr("LAB_ROOTFS_DIR", "/var/lab"), bindDir: envOr("LAB_BIND_DIR", "/pvc")}
	if err := s.open(mib); err != nil {
		return err
	}
	go func() {
		for range time.Tick(10 * time.Millisecond) {
			s.counter.Add(1)
		}
	}()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /state", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, s.report()) })
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		if err := s.setToken(r.URL.Query().Get("t")); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		writeJSON(w, s.report())
	})
	fmt.Println("workload: serving on", apiAddr)
	return http.ListenAndServe(apiAddr, mux)
}

// open fills the buffer (with non-zero pseudo-random bytes, so that neither the kernel nor a
// checkpoint can skip its pages), opens the files, starts the child and dials the held connection.
func (s *state) open(mib int) error {
	s.buf = make([]byte, mib<<20)
	x := uint64(0x9e3779b97f4a7c15)
	for i := 0; i+8 <= len(s.buf); i += 8 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		for j := range 8 {
			s.buf[i+j] = byte(x >> (8 * j))
		}
	}
	s.bufCRC = crc32.ChecksumIEEE(s.buf)
	var err error
	for _, d := range []string{s.rootfsDir, s.bindDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if s.openFile, err = os.OpenFile(s.rootfsDir+"/open.log", os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o644); err != nil {
		return err
	}
	if s.bindFile, err = os.OpenFile(s.bindDir+"/open.log", os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o644); err != nil {
		return err
	}
	s.child = exec.Command("/proc/self/exe", "sleep")
	if err := s.child.Start(); err != nil {
		return fmt.Errorf("starting the child: %w", err)
	}
	return s.holdConnection()
}

// holdConnection listens on echoAddr and dials it once: both ends stay open for the process's life.
func (s *state) holdConnection() error {
	l, err := net.Listen("tcp", echoAddr)
	if err != nil {
		return err
	}
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		r := bufio.NewReader(c)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			_, _ = io.WriteString(c, "pong "+line)
		}
	}()
	if s.held, err = net.Dial("tcp", echoAddr); err != nil {
		return err
	}
	s.heldR = bufio.NewReader(s.held)
	return nil
}

func (s *state) setToken(t string) error {
	s.mu.Lock()
	s.token = t
	s.mu.Unlock()
	if err := os.WriteFile(s.rootfsDir+"/token", []byte(t), 0o644); err != nil {
		return err
	}
	return os.WriteFile(s.bindDir+"/token", []byte(t), 0o644)
}

func (s *state) report() report.Report {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.counter.Load()
	host, _ := os.Hostname()
	crc := crc32.ChecksumIEEE(s.buf)
	return report.Report{
		PID: os.Getpid(), ChildPID: s.child.Process.Pid,
		ChildAlive: running(s.child.Process.Pid),
		Counter:    n, Token: s.token,
		MemoryMiB: len(s.buf) >> 20, MemoryCRC: crc, MemoryIntact: crc == s.bufCRC,
		RSSKiB:       rssKiB(),
		OpenFile:     appendAndReadBack(s.openFile, n),
		BindOpenFile: appendAndReadBack(s.bindFile, n),
		RootfsFile:   readOrError(s.rootfsDir + "/token"),
		BindFile:     readOrError(s.bindDir + "/token"),
		HeldConn:     s.roundTrip(n),
		Hostname:     host,
		Addrs:        addrs(),
	}
}

// appendAndReadBack writes a line through f (opened at start) and returns the file's last line.
func appendAndReadBack(f *os.File, n int64) string {
	if _, err := fmt.Fprintf(f, "line %d\n", n); err != nil {
		return "error: " + err.Error()
	}
	data, err := os.ReadFile(f.Name())
	if err != nil {
		return "error: " + err.Error()
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	return fmt.Sprintf("%d lines, last %q", len(lines), lines[len(lines)-1])
}

func (s *state) roundTrip(n int64) string {
	_ = s.held.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := fmt.Fprintf(s.held, "%d\n", n); err != nil {
		return "error: " + err.Error()
	}
	line, err := s.heldR.ReadString('\n')
	if err != nil {
		return "error: " + err.Error()
	}
	return strings.TrimSpace(line)
}

func probe(args []string) error {
	method, url := http.MethodGet, "http://"+apiAddr+"/state"
	if len(args) > 0 {
		method, url = http.MethodPost, "http://"+apiAddr+"/token?t="+args[0]
	}
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		return err
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("%s: %s", resp.Status, body)
	}
	_, err = io.Copy(os.Stdout, resp.Body)
	return err
}

// running reports whether pid is alive and not a zombie (kill(pid, 0) succeeds on zombies too).
func running(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	_, after, ok := strings.Cut(string(data), ") ")
	return ok && !strings.HasPrefix(after, "Z") && !strings.HasPrefix(after, "X")
}

func rssKiB() int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return -1
}

func addrs() string {
	as, err := net.InterfaceAddrs()
	if err != nil {
		return "error: " + err.Error()
	}
	var out []string
	for _, a := range as {
		out = append(out, a.String())
	}
	return strings.Join(out, ",")
}

func readOrError(p string) string {
	data, err := os.ReadFile(p)
	if err != nil {
		return "error: " + err.Error()
	}
	return string(data)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
