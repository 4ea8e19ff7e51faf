package sdk

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"

	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
)

// portForwardEndpoint reaches sandboxd through a port-forward to the sandbox pod,
// opened on first use and reopened when it died (the pod was replaced, or a
// stream failed: client-go closes the whole forward then).
type portForwardEndpoint struct {
	c *Client
	s *Sandbox

	mu sync.Mutex
	fw *forward
}

type forward struct {
	local uint16
	stop  chan struct{}
	done  chan struct{}
	err   error // set before done is closed
}

func (f *forward) alive() bool {
	select {
	case <-f.done:
		return false
	default:
		return true
	}
}

func (f *forward) close() {
	select {
	case <-f.stop:
	default:
		close(f.stop)
	}
	<-f.done
}

func (e *portForwardEndpoint) base(ctx context.Context) (*url.URL, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.fw == nil || !e.fw.alive() {
		if e.fw != nil {
			e.fw.close()
			e.fw = nil
		}
		fw, err := e.open(ctx)
		if err != nil {
			return nil, err
		}
		e.fw = fw
	}
	return &url.URL{Scheme: "http", Host: "127.0.0.1:" + strconv.Itoa(int(e.fw.local))}, nil
}

// open starts a port-forward to the pod's sandboxd port on a free local port.
func (e *portForwardEndpoint) open(ctx context.Context) (*forward, error) {
	if _, err := e.s.ensureIPs(ctx); err != nil { // a pod to forward to
		return nil, err
	}
	pod := e.s.sandboxObjectName() // the controller names the pod after its Sandbox
	rt, upgrader, err := spdy.RoundTripperFor(e.c.cfg)
	if err != nil {
		return nil, fmt.Errorf("port-forward: %w", err)
	}
	u := e.c.core.CoreV1().RESTClient().Post().Resource("pods").Namespace(e.s.ns).Name(pod).SubResource("portforward").URL()
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: rt}, http.MethodPost, u)
	fw := &forward{stop: make(chan struct{}), done: make(chan struct{})}
	ready := make(chan struct{})
	pf, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{"0:" + strconv.Itoa(e.c.opts.SandboxPort)},
		fw.stop, ready, io.Discard, io.Discard)
	if err != nil {
		return nil, fmt.Errorf("port-forward to pod %s/%s: %w", e.s.ns, pod, err)
	}
	go func() {
		fw.err = pf.ForwardPorts()
		close(fw.done)
	}()
	select {
	case <-ready:
	case <-fw.done:
		return nil, fmt.Errorf("port-forward to pod %s/%s: %w: %w", e.s.ns, pod, ErrNotReady, fw.err)
	case <-ctx.Done():
		fw.close()
		return nil, ctx.Err()
	}
	ports, err := pf.GetPorts()
	if err != nil || len(ports) == 0 {
		fw.close()
		return nil, fmt.Errorf("port-forward to pod %s/%s: no local port: %v", e.s.ns, pod, err)
	}
	fw.local = ports[0].Local
	return fw, nil
}

func (e *portForwardEndpoint) decorate(h http.Header) {
	if e.c.opts.SandboxToken != "" {
		h.Set("Authorization", "Bearer "+e.c.opts.SandboxToken)
	}
}

// dialFailed drops the forward so the next request opens a new one (after
// looking the pod up again).
func (e *portForwardEndpoint) dialFailed(ctx context.Context, n int) bool {
	if n > 0 {
		return false
	}
	e.reset()
	return e.s.Refresh(ctx) == nil
}

func (e *portForwardEndpoint) reset() {
	e.mu.Lock()
	fw := e.fw
	e.fw = nil
	e.mu.Unlock()
	if fw != nil {
		fw.close()
	}
}
