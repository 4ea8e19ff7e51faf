package sdk

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/agent-sandbox/agent-sandbox/pkg/sandboxd/wire"
)

// httpClients are shared by every handle of a Client: api speaks h2c to
// plain-HTTP endpoints (one multiplexed connection per endpoint), ws speaks
// HTTP/1.1 for WebSocket upgrades.
type httpClients struct {
	api, ws *http.Client
	tr      []*http.Transport
}

func newHTTPClients(o Options) *httpClients {
	// A sandbox's redirect is its answer, never followed: it would carry the router token where
	// untrusted code points (as internal/noredirect does for the router and the controller; pkg/
	// may not import internal/).
	noRedirect := func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	mk := func(protos *http.Protocols) *http.Transport {
		return &http.Transport{
			Proxy:                 nil, // pod IPs and the local port-forward are never behind a proxy
			DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			Protocols:             protos,
			MaxIdleConnsPerHost:   16,
			IdleConnTimeout:       90 * time.Second,
			TLSHandshakeTimeout:   10 * time.Second,
			ExpectContinueTimeout: time.Second,
			DisableCompression:    true,
			HTTP2: &http.HTTP2Config{
				SendPingTimeout: 30 * time.Second,
				PingTimeout:     15 * time.Second,
			},
		}
	}
	h := &httpClients{}
	var h1p http.Protocols
	h1p.SetHTTP1(true)
	h1 := mk(&h1p)
	h.tr = append(h.tr, h1)
	h.ws = &http.Client{Transport: h1, CheckRedirect: noRedirect}
	var rt http.RoundTripper = h1
	switch {
	case o.HTTPTransport != nil:
		rt = o.HTTPTransport
		h.ws = &http.Client{Transport: o.HTTPTransport, CheckRedirect: noRedirect}
	case !o.DisableHTTP2:
		var h2cp, tlsp http.Protocols
		h2cp.SetUnencryptedHTTP2(true) // alone: prior-knowledge h2c for http:// URLs
		tlsp.SetHTTP1(true)
		tlsp.SetHTTP2(true)
		h2c, tls := mk(&h2cp), mk(&tlsp)
		h.tr = append(h.tr, h2c, tls)
		rt = schemeRoundTripper{plain: h2c, tls: tls}
	}
	h.api = &http.Client{Transport: rt, CheckRedirect: noRedirect}
	return h
}

func (h *httpClients) closeIdle() {
	for _, t := range h.tr {
		t.CloseIdleConnections()
	}
}

// schemeRoundTripper sends http:// over h2c and https:// with ALPN.
type schemeRoundTripper struct{ plain, tls http.RoundTripper }

func (s schemeRoundTripper) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Scheme == "https" || r.URL.Scheme == "wss" {
		return s.tls.RoundTrip(r)
	}
	return s.plain.RoundTrip(r)
}

// endpoint is how one HTTP mode reaches a sandbox's sandboxd.
type endpoint interface {
	// base is the URL the API paths are appended to.
	base(ctx context.Context) (*url.URL, error)
	// decorate adds routing and authentication headers.
	decorate(h http.Header)
	// dialFailed is told that connecting failed for the n-th time (from 0),
	// so that the next base() looks the pod up again (a resumed pod has a new
	// IP; a port-forward dies with its pod). It reports whether a retry may
	// help. Nothing reached a server, so any request may be sent again.
	dialFailed(ctx context.Context, n int) bool
	reset()
}

type routerEndpoint struct {
	c *Client
	s *Sandbox
}

func (e *routerEndpoint) base(ctx context.Context) (*url.URL, error) {
	if e.s.SandboxName() == "" && !e.s.raw {
		// The router routes by Sandbox name, which the claim learns from the controller.
		if err := e.s.Refresh(ctx); err != nil {
			return nil, err
		}
		if e.s.SandboxName() == "" {
			return nil, fmt.Errorf("sandboxclaim %s/%s has no sandbox yet: %w", e.s.ns, e.s.name, ErrNotReady)
		}
	}
	return url.Parse(e.c.opts.RouterURL)
}

func (e *routerEndpoint) decorate(h http.Header) {
	h.Set("X-Sandbox-ID", e.s.sandboxObjectName())
	h.Set("X-Sandbox-Namespace", e.s.ns)
	h.Set("X-Sandbox-Port", strconv.Itoa(e.c.opts.SandboxPort))
	if e.c.opts.RouterToken != "" {
		h.Set("Authorization", "Bearer "+e.c.opts.RouterToken)
	}
}

// routerRedialDelays pace the redials of a router that refuses connections:
// a replica that died stays behind its Service until the kubelet and the
// endpoint controller notice (a second or two), and a later dial reaches a
// live one. About 3 s in all.
var routerRedialDelays = []time.Duration{50 * time.Millisecond, 100 * time.Millisecond,
	200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, 1500 * time.Millisecond}

func (e *routerEndpoint) dialFailed(ctx context.Context, n int) bool {
	if n >= len(routerRedialDelays) {
		return false
	}
	return sleepCtx(ctx, routerRedialDelays[n])
}

func (e *routerEndpoint) reset() {}

type directEndpoint struct {
	c *Client
	s *Sandbox
}

func (e *directEndpoint) base(ctx context.Context) (*url.URL, error) {
	ip, err := e.s.ensureIPs(ctx)
	if err != nil {
		return nil, err
	}
	return &url.URL{Scheme: "http", Host: net.JoinHostPort(ip, strconv.Itoa(e.c.opts.SandboxPort))}, nil
}

func (e *directEndpoint) decorate(h http.Header) {
	if e.c.opts.SandboxToken != "" {
		h.Set("Authorization", "Bearer "+e.c.opts.SandboxToken)
	}
}

func (e *directEndpoint) dialFailed(ctx context.Context, n int) bool {
	if n > 0 {
		return false
	}
	old := e.s.PodIP()
	if err := e.s.Refresh(ctx); err != nil {
		return false
	}
	return e.s.PodIP() != old && e.s.PodIP() != ""
}

func (e *directEndpoint) reset() {}

// httpTransport speaks sandboxd's HTTP API through an endpoint.
type httpTransport struct {
	c  *Client
	ep endpoint
}

func newHTTPTransport(c *Client, ep endpoint) *httpTransport { return &httpTransport{c: c, ep: ep} }

func (t *httpTransport) reset() { t.ep.reset() }

// request is one call of the sandboxd API.
type request struct {
	method, path string // path is the API path, unescaped
	query        url.Values
	body         io.Reader
	contentType  string
	accept       string
}

func (r *request) op() string { return r.method + " " + r.path }

// do sends r and returns a 2xx response, or an *APIError for any other
// status. A failed dial is retried once after looking the pod up again (a
// router: for a few seconds, until its Service drops a dead replica), a
// router that does not know a just-ready sandbox yet is retried for a moment
// (routerLag), when the body can be replayed, and an idempotent read whose
// connection broke before the answer is sent twice more (retryLost).
func (t *httpTransport) do(ctx context.Context, r *request) (*http.Response, error) {
	var lag routerLag
	// The first request's body source replays the body on every retry (r.body itself is read
	// once).
	var getBody func() (io.ReadCloser, error)
	var contentLength int64
	dials, lost := 0, 0
	for attempt := 0; ; attempt++ {
		req, err := t.newRequest(ctx, r)
		if err != nil {
			return nil, err
		}
		if attempt == 0 {
			getBody, contentLength = req.GetBody, req.ContentLength
		} else if getBody != nil {
			body, err := getBody()
			if err != nil {
				return nil, err
			}
			req.Body, req.GetBody, req.ContentLength = body, getBody, contentLength
		}
		replayable := req.Body == nil || req.Body == http.NoBody || getBody != nil
		resp, err := t.c.http.api.Do(req)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if isDialError(err) && replayable && t.ep.dialFailed(ctx, dials) {
				dials++
				continue
			}
			if !isDialError(err) && t.retryLost(ctx, r, lost) {
				lost++
				continue
			}
			if !isDialError(err) {
				return nil, fmt.Errorf("sandbox API %s: %w: %w", r.op(), ErrConnectionLost, err)
			}
			return nil, fmt.Errorf("sandbox API %s: %w", r.op(), err)
		}
		if resp.StatusCode/100 == 2 {
			return resp, nil
		}
		apiErr := readAPIError(resp, r.op())
		resp.Body.Close()
		if replayable && lag.retry(ctx, t.ep, apiErr) {
			continue
		}
		return nil, apiErr
	}
}

// routerLagWindow is how long after a sandbox became ready the SDK keeps
// retrying a router that answers "not found" or "not ready" for it: the
// router learns about sandboxes from its own watch, which can trail the
// SDK's by a few milliseconds.
const routerLagWindow = 10 * time.Second

// routerLag paces those retries.
type routerLag struct{ delay time.Duration }

// retry reports whether err is the router (not sandboxd) saying it does
// not know the sandbox or finds it not ready while the SDK saw it become
// ready moments ago; it waits before the next attempt.
func (l *routerLag) retry(ctx context.Context, ep endpoint, err error) bool {
	re, ok := ep.(*routerEndpoint)
	var ae *APIError
	if !ok || !errors.As(err, &ae) || !ae.fromRouter ||
		(ae.Status != http.StatusNotFound && ae.Status != http.StatusServiceUnavailable) {
		return false
	}
	readyAt := re.s.readySince()
	if readyAt.IsZero() || time.Since(readyAt) > routerLagWindow {
		return false
	}
	if l.delay == 0 {
		l.delay = 10 * time.Millisecond
	}
	if !sleepCtx(ctx, l.delay) {
		return false
	}
	l.delay = min(2*l.delay, 500*time.Millisecond)
	return true
}

func (t *httpTransport) newRequest(ctx context.Context, r *request) (*http.Request, error) {
	base, err := t.ep.base(ctx)
	if err != nil {
		return nil, err
	}
	u := *base
	u.Path = strings.TrimRight(u.Path, "/") + r.path
	u.RawPath = ""
	u.RawQuery = r.query.Encode()
	req, err := http.NewRequestWithContext(ctx, r.method, u.String(), r.body)
	if err != nil {
		return nil, err
	}
	if r.contentType != "" {
		req.Header.Set("Content-Type", r.contentType)
	}
	if r.accept != "" {
		req.Header.Set("Accept", r.accept)
	}
	req.Header.Set("User-Agent", t.c.opts.UserAgent)
	t.ep.decorate(req.Header)
	return req, nil
}

func isDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// readAPIError turns an error response into an *APIError, reading
// sandboxd's {"error"} or the router's {"detail"}.
func readAPIError(resp *http.Response, op string) *APIError {
	b := readErrorBody(resp)
	e := &APIError{Status: resp.StatusCode, Op: op}
	var body struct {
		Error   string `json:"error"`   // sandboxd's own API
		Detail  string `json:"detail"`  // the router
		Message string `json:"message"` // sandboxd's /v1/files (upstream's shape, with "code")
	}
	if json.Unmarshal(b, &body) == nil && (body.Error != "" || body.Detail != "" || body.Message != "") {
		e.Message = body.Error + body.Detail + body.Message
		e.fromRouter = body.Detail != "" && body.Error == "" && body.Message == ""
	} else {
		e.Message = strings.TrimSpace(string(b))
		if len(e.Message) > 512 {
			e.Message = e.Message[:512] + "…"
		}
	}
	return e
}

// readErrorBody reads at most 64 KiB of an error answer. With a
// Content-Length it reads exactly that much and does not wait for the end of
// the stream: a server that answered before reading our whole request body
// (sandboxd refusing a path) may only end the response once the request
// ends, and a proxy in between can hold both open. Closing the body right
// after resets the HTTP/2 stream instead.
func readErrorBody(resp *http.Response) []byte {
	const limit = 64 << 10
	if n := resp.ContentLength; n >= 0 && n <= limit {
		b := make([]byte, n)
		k, _ := io.ReadFull(resp.Body, b)
		return b[:k]
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, limit))
	return b
}

// doJSON sends r and decodes a JSON answer into out (when not nil).
func (t *httpTransport) doJSON(ctx context.Context, r *request, out any) error {
	resp, err := t.do(ctx, r)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("sandbox API %s: decoding the answer: %w", r.op(), err)
	}
	return nil
}

func jsonBody(v any) (io.Reader, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return bytes.NewReader(b), nil
}

// filePath renders a sandbox path for the URL: relative to the root.
func filePath(p string) string { return strings.TrimLeft(p, "/") }

func modeQuery(perm fs.FileMode) url.Values {
	if perm == 0 {
		return nil
	}
	return url.Values{"mode": {fmt.Sprintf("%04o", perm.Perm())}}
}

// ---- files ----

func (t *httpTransport) readFile(ctx context.Context, p string) (io.ReadCloser, error) {
	r := &request{method: http.MethodGet, path: "/v1/files/" + filePath(p)}
	resp, err := t.do(ctx, r)
	if err != nil {
		return nil, err
	}
	if ct := resp.Header.Get("Content-Type"); strings.HasPrefix(ct, wire.ContentTypeJSON) {
		// A directory: sandboxd answers with its listing (upstream's API); reading one is an error.
		resp.Body.Close()
		return nil, &APIError{Status: http.StatusBadRequest, Message: "path is a directory; use DownloadDir or List", Op: r.op()}
	}
	return resp.Body, nil
}

func (t *httpTransport) writeFile(ctx context.Context, p string, r io.Reader, perm fs.FileMode) error {
	return t.doJSON(ctx, &request{method: http.MethodPut, path: "/v1/files/" + filePath(p), query: modeQuery(perm),
		body: r, contentType: wire.ContentTypeOctet}, nil)
}

func (t *httpTransport) remove(ctx context.Context, p string, recursive bool) error {
	q := url.Values{}
	if recursive {
		q.Set("recursive", "true")
	}
	return t.doJSON(ctx, &request{method: http.MethodDelete, path: "/v1/files/" + filePath(p), query: q}, nil)
}

func (t *httpTransport) mkdir(ctx context.Context, p string, perm fs.FileMode) error {
	return t.doJSON(ctx, &request{method: http.MethodPost, path: "/v1/mkdir/" + filePath(p), query: modeQuery(perm)}, nil)
}

func (t *httpTransport) stat(ctx context.Context, p string) (*FileInfo, error) {
	var fi wire.FileInfo
	if err := t.doJSON(ctx, &request{method: http.MethodGet, path: "/v1/stat/" + filePath(p)}, &fi); err != nil {
		return nil, err
	}
	out := fileInfoFromWire(fi)
	return &out, nil
}

func (t *httpTransport) list(ctx context.Context, p string, recursive bool) ([]FileInfo, error) {
	q := url.Values{}
	if recursive {
		q.Set("recursive", "true")
	}
	var lr wire.ListResponse
	if err := t.doJSON(ctx, &request{method: http.MethodGet, path: "/v1/list/" + filePath(p), query: q}, &lr); err != nil {
		return nil, err
	}
	out := make([]FileInfo, len(lr.Entries))
	for i, e := range lr.Entries {
		out[i] = fileInfoFromWire(e)
	}
	return out, nil
}

func (t *httpTransport) getTar(ctx context.Context, dir string) (io.ReadCloser, error) {
	resp, err := t.do(ctx, &request{method: http.MethodGet, path: "/v1/files/" + filePath(dir), query: url.Values{"format": {"tar"}}})
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

func (t *httpTransport) putTar(ctx context.Context, dir string, r io.Reader) error {
	return t.doJSON(ctx, &request{method: http.MethodPut, path: "/v1/files/" + filePath(dir), body: r, contentType: wire.ContentTypeTar}, nil)
}

func (t *httpTransport) watch(ctx context.Context, p string, recursive bool) (<-chan Event, error) {
	q := url.Values{}
	if recursive {
		q.Set("recursive", "true")
	}
	resp, err := t.do(ctx, &request{method: http.MethodGet, path: "/v1/watch/" + filePath(p), query: q, accept: wire.ContentTypeNDJSON})
	if err != nil {
		return nil, err
	}
	ch := make(chan Event, 64)
	go func() {
		defer close(ch)
		defer resp.Body.Close()
		dec := json.NewDecoder(resp.Body)
		for {
			var ev wire.WatchEvent
			if err := dec.Decode(&ev); err != nil {
				return
			}
			select {
			case ch <- Event{Op: EventOp(ev.Op), Path: ev.Path}:
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch, nil
}

func fileInfoFromWire(w wire.FileInfo) FileInfo {
	perm, _ := strconv.ParseUint(w.Mode, 8, 32)
	mode := fs.FileMode(perm).Perm()
	if w.IsDir {
		mode |= fs.ModeDir
	}
	if w.IsSymlink {
		mode |= fs.ModeSymlink
	}
	return FileInfo{Name: w.Name, Path: w.Path, Size: w.Size, Mode: mode, ModTime: w.ModTime,
		IsDir: w.IsDir, IsSymlink: w.IsSymlink, LinkTarget: w.LinkTarget}
}

// ---- background processes ----

func (t *httpTransport) start(ctx context.Context, cmd Command, rc *runConfig) (*Process, error) {
	req, err := execRequest(cmd, rc)
	if err != nil {
		return nil, err
	}
	if rc.stdin != nil {
		b, ok, err := inMemoryStdin(rc.stdin)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, errors.New("start: stdin must be an in-memory reader (*bytes.Reader, *strings.Reader, *bytes.Buffer) of at most 8 MiB")
		}
		req.StdinBase64 = b
	}
	body, err := jsonBody(req)
	if err != nil {
		return nil, err
	}
	var sr wire.StartProcessResponse
	if err := t.doJSON(ctx, &request{method: http.MethodPost, path: "/v1/processes", body: body, contentType: wire.ContentTypeJSON}, &sr); err != nil {
		return nil, err
	}
	return &Process{ID: sr.ID, PID: sr.PID, Argv: req.Argv, Command: req.Command, Cwd: req.Cwd, StartedAt: time.Now(), Running: true}, nil
}

func processFromWire(w wire.Process) Process {
	p := Process{ID: w.ID, PID: w.PID, Argv: w.Argv, Command: w.Command, Cwd: w.Cwd, StartedAt: w.StartedAt,
		Running: w.Running, TimedOut: w.TimedOut}
	if w.ExitCode != nil {
		p.ExitCode = *w.ExitCode
	}
	if w.ExitedAt != nil {
		p.ExitedAt = *w.ExitedAt
	}
	return p
}

func (t *httpTransport) processes(ctx context.Context) ([]Process, error) {
	var pl wire.ProcessList
	if err := t.doJSON(ctx, &request{method: http.MethodGet, path: "/v1/processes"}, &pl); err != nil {
		return nil, err
	}
	out := make([]Process, len(pl.Processes))
	for i, p := range pl.Processes {
		out[i] = processFromWire(p)
	}
	return out, nil
}

func (t *httpTransport) processCall(ctx context.Context, method, id, action string, body any) (*Process, error) {
	r := &request{method: method, path: "/v1/processes/" + url.PathEscape(id) + action}
	if body != nil {
		b, err := jsonBody(body)
		if err != nil {
			return nil, err
		}
		r.body, r.contentType = b, wire.ContentTypeJSON
	}
	var wp wire.Process
	if err := t.doJSON(ctx, r, &wp); err != nil {
		return nil, err
	}
	p := processFromWire(wp)
	return &p, nil
}

func (t *httpTransport) process(ctx context.Context, id string) (*Process, error) {
	return t.processCall(ctx, http.MethodGet, id, "", nil)
}

func (t *httpTransport) signal(ctx context.Context, id, sig string) (*Process, error) {
	return t.processCall(ctx, http.MethodPost, id, "/signal", wire.SignalRequest{Signal: sig})
}

func (t *httpTransport) kill(ctx context.Context, id string) (*Process, error) {
	return t.processCall(ctx, http.MethodDelete, id, "", nil)
}

func (t *httpTransport) logs(ctx context.Context, id string) (*ProcessLogs, error) {
	var pl wire.ProcessLogs
	if err := t.doJSON(ctx, &request{method: http.MethodGet, path: "/v1/processes/" + url.PathEscape(id) + "/logs"}, &pl); err != nil {
		return nil, err
	}
	return &ProcessLogs{Stdout: pl.Stdout, Stderr: pl.Stderr, Truncated: pl.StdoutTruncated || pl.StderrTruncated}, nil
}

func (t *httpTransport) followLogs(ctx context.Context, id string, stdout, stderr io.Writer) (int, error) {
	resp, err := t.do(ctx, &request{method: http.MethodGet, path: "/v1/processes/" + url.PathEscape(id) + "/logs",
		query: url.Values{"follow": {"true"}}, accept: wire.ContentTypeNDJSON})
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sink := &outputSink{stdout: stdout, stderr: stderr}
	res, err := readFrames(ctx, json.NewDecoder(resp.Body), sink, "GET /v1/processes/"+id+"/logs")
	if err != nil {
		return 0, err
	}
	return res.ExitCode, nil
}
