package devcluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// component is one process of the cluster and how to tell it is ready.
type component struct {
	name    string
	exe     string
	args    []string
	env     []string
	addrs   []string // listen addresses that must be free before a start
	ready   func(context.Context) error
	timeout time.Duration
}

// ensure starts the component unless our recorded process of that name still runs, then waits
// for it to be ready. A stranger on one of its ports is reported instead of fought.
func (c *Config) ensure(ctx context.Context, comp component) error {
	if r := c.running(comp.name); r != nil {
		c.Log.Info("already running", "component", comp.name, "pid", r.PID)
		return c.waitUntil(ctx, comp.name, r, comp.timeout, comp.ready)
	}
	for _, a := range comp.addrs {
		if err := portFree(a); err != nil {
			return fmt.Errorf("%s: %w", comp.name, err)
		}
	}
	c.progress("starting %s", comp.name)
	r, err := c.start(comp.name, comp.exe, comp.args, comp.env...)
	if err != nil {
		return err
	}
	return c.waitUntil(ctx, comp.name, r, comp.timeout, comp.ready)
}

func loopback(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }

func bridgeAddr(port int) string { return bridgeIP + ":" + strconv.Itoa(port) }

func (c *Config) etcd(bin string) component {
	client := "http://" + loopback(c.Ports.EtcdClient)
	peer := "http://" + loopback(c.Ports.EtcdPeer)
	return component{
		name: "etcd", exe: bin + "/etcd", timeout: time.Minute,
		addrs: []string{loopback(c.Ports.EtcdClient), loopback(c.Ports.EtcdPeer)},
		args: []string{
			"--name=dev", "--data-dir=" + c.path("etcd"),
			"--listen-client-urls=" + client, "--advertise-client-urls=" + client,
			"--listen-peer-urls=" + peer, "--initial-advertise-peer-urls=" + peer,
			"--initial-cluster=dev=" + peer,
			// A throwaway dev cluster: durability is not worth the fsync latency.
			"--unsafe-no-fsync", "--quota-backend-bytes=8589934592", "--log-level=warn",
		},
		ready: func(ctx context.Context) error { return httpOK(ctx, nil, client+"/health", `"health":"true"`) },
	}
}

func (c *Config) apiserver(bin string) component {
	pki := c.path("pki")
	return component{
		name: "kube-apiserver", exe: bin + "/kube-apiserver", timeout: 2 * time.Minute,
		addrs: []string{bridgeAddr(c.Ports.APIServer)},
		args: []string{
			"--etcd-servers=http://" + loopback(c.Ports.EtcdClient),
			// On the bridge only: the host and the pods (the kubernetes Service's endpoint is
			// the advertise address) reach it there, nothing off this machine does.
			"--bind-address=" + bridgeIP, "--advertise-address=" + bridgeIP,
			"--secure-port=" + strconv.Itoa(c.Ports.APIServer),
			"--tls-cert-file=" + pki + "/apiserver.crt", "--tls-private-key-file=" + pki + "/apiserver.key",
			"--client-ca-file=" + pki + "/ca.crt",
			"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
			"--service-account-key-file=" + pki + "/sa.pub",
			"--service-account-signing-key-file=" + pki + "/sa.key",
			"--service-cluster-ip-range=" + serviceCIDR,
			"--authorization-mode=Node,RBAC",
			"--enable-admission-plugins=NodeRestriction",
			"--allow-privileged=true",
			"--kubelet-client-certificate=" + pki + "/apiserver-kubelet-client.crt",
			"--kubelet-client-key=" + pki + "/apiserver-kubelet-client.key",
			"--kubelet-certificate-authority=" + pki + "/ca.crt",
			"--kubelet-preferred-address-types=InternalIP",
			"--profiling=false",
		},
		ready: c.healthz(c.apiServerURL()+"/readyz", "admin"),
	}
}

func (c *Config) controllerManager(bin string) component {
	pki, kc := c.path("pki"), c.kubeconfigFor("kube-controller-manager")
	return component{
		name: "kube-controller-manager", exe: bin + "/kube-controller-manager", timeout: time.Minute,
		addrs: []string{loopback(c.Ports.ControllerManager)},
		args: []string{
			"--kubeconfig=" + kc, "--authentication-kubeconfig=" + kc, "--authorization-kubeconfig=" + kc,
			"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(c.Ports.ControllerManager),
			"--tls-cert-file=" + pki + "/kcm-serving.crt", "--tls-private-key-file=" + pki + "/kcm-serving.key",
			"--client-ca-file=" + pki + "/ca.crt",
			"--root-ca-file=" + pki + "/ca.crt",
			"--cluster-signing-cert-file=" + pki + "/ca.crt", "--cluster-signing-key-file=" + pki + "/ca.key",
			"--service-account-private-key-file=" + pki + "/sa.key",
			"--use-service-account-credentials=true",
			// PVCs bind on this one-node cluster: PVs are directories under /tmp/hostpath_pv.
			"--enable-hostpath-provisioner=true",
			"--leader-elect=false",
			// The defaults (20 QPS) make garbage collection lag behind e2e churn.
			"--kube-api-qps=200", "--kube-api-burst=400",
		},
		ready: c.healthz(fmt.Sprintf("https://%s/healthz", loopback(c.Ports.ControllerManager)), ""),
	}
}

func (c *Config) scheduler(bin string) component {
	pki, kc := c.path("pki"), c.kubeconfigFor("kube-scheduler")
	return component{
		name: "kube-scheduler", exe: bin + "/kube-scheduler", timeout: time.Minute,
		addrs: []string{loopback(c.Ports.Scheduler)},
		args: []string{
			"--kubeconfig=" + kc, "--authentication-kubeconfig=" + kc, "--authorization-kubeconfig=" + kc,
			"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(c.Ports.Scheduler),
			"--tls-cert-file=" + pki + "/scheduler-serving.crt", "--tls-private-key-file=" + pki + "/scheduler-serving.key",
			"--client-ca-file=" + pki + "/ca.crt",
			"--leader-elect=false",
			// The default client QPS (50) caps scheduling near 50 pods/s.
			"--kube-api-qps=1000", "--kube-api-burst=2000",
		},
		ready: c.healthz(fmt.Sprintf("https://%s/healthz", loopback(c.Ports.Scheduler)), ""),
	}
}

// healthz checks an HTTPS health endpoint served with a certificate of our CA, presenting the
// client certificate of identity when one is given.
func (c *Config) healthz(url, identity string) func(context.Context) error {
	return func(ctx context.Context) error {
		tc, err := c.tlsConfig(identity)
		if err != nil {
			return err
		}
		return httpOK(ctx, tc, url, "ok")
	}
}

func (c *Config) tlsConfig(identity string) (*tls.Config, error) {
	pki := c.path("pki")
	ca, err := os.ReadFile(pki + "/ca.crt")
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	tc := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if identity != "" {
		crt, err := tls.LoadX509KeyPair(pki+"/"+identity+".crt", pki+"/"+identity+".key")
		if err != nil {
			return nil, err
		}
		tc.Certificates = []tls.Certificate{crt}
	}
	return tc, nil
}

// httpOK GETs url and wants a 200 whose body contains want.
func httpOK(ctx context.Context, tc *tls.Config, url, want string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	tr := &http.Transport{TLSClientConfig: tc, DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
		return fmt.Errorf("GET %s: %d %s", url, resp.StatusCode, strings.TrimSpace(string(body)))
	}
	return nil
}
