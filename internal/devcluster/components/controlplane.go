package components

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/pki"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/proc"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/spec"
)

func (c *Cluster) etcd(bin string) proc.Component {
	client := "http://" + spec.Loopback(c.Ports.EtcdClient)
	peer := "http://" + spec.Loopback(c.Ports.EtcdPeer)
	return proc.Component{
		Name: "etcd", Exe: bin + "/etcd", Timeout: time.Minute,
		Addrs: []string{spec.Loopback(c.Ports.EtcdClient), spec.Loopback(c.Ports.EtcdPeer)},
		Args: []string{
			"--name=dev", "--data-dir=" + c.Path("etcd"),
			"--listen-client-urls=" + client, "--advertise-client-urls=" + client,
			"--listen-peer-urls=" + peer, "--initial-advertise-peer-urls=" + peer,
			"--initial-cluster=dev=" + peer,
			// A throwaway dev cluster: durability is not worth the fsync latency.
			"--unsafe-no-fsync", "--quota-backend-bytes=8589934592", "--log-level=warn",
		},
		Ready: func(ctx context.Context) error { return proc.HTTPOK(ctx, nil, client+"/health", `"health":"true"`) },
	}
}

func (c *Cluster) apiserver(bin string) proc.Component {
	pki := c.Path("pki")
	return proc.Component{
		Name: "kube-apiserver", Exe: bin + "/kube-apiserver", Timeout: 2 * time.Minute,
		Addrs: []string{spec.BridgeAddr(c.Ports.APIServer)},
		Args: []string{
			"--etcd-servers=http://" + spec.Loopback(c.Ports.EtcdClient),
			// On the bridge only: the host and the pods (the kubernetes Service's endpoint is
			// the advertise address) reach it there, nothing off this machine does.
			"--bind-address=" + spec.BridgeIP, "--advertise-address=" + spec.BridgeIP,
			"--secure-port=" + strconv.Itoa(c.Ports.APIServer),
			"--tls-cert-file=" + pki + "/apiserver.crt", "--tls-private-key-file=" + pki + "/apiserver.key",
			"--client-ca-file=" + pki + "/ca.crt",
			"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
			"--service-account-key-file=" + pki + "/sa.pub",
			"--service-account-signing-key-file=" + pki + "/sa.key",
			"--service-cluster-ip-range=" + spec.ServiceCIDR,
			"--authorization-mode=Node,RBAC",
			"--enable-admission-plugins=NodeRestriction",
			"--allow-privileged=true",
			"--kubelet-client-certificate=" + pki + "/apiserver-kubelet-client.crt",
			"--kubelet-client-key=" + pki + "/apiserver-kubelet-client.key",
			"--kubelet-certificate-authority=" + pki + "/ca.crt",
			"--kubelet-preferred-address-types=InternalIP",
			"--profiling=false",
		},
		Ready: c.healthz(c.APIServerURL()+"/readyz", "admin"),
	}
}

func (c *Cluster) controllerManager(bin string) proc.Component {
	pki := c.Path("pki")
	return proc.Component{
		Name: "kube-controller-manager", Exe: bin + "/kube-controller-manager", Timeout: time.Minute,
		Addrs: []string{spec.Loopback(c.Ports.ControllerManager)},
		Args: append(c.secureServingArgs("kube-controller-manager", c.Ports.ControllerManager, "kcm-serving"),
			"--root-ca-file="+pki+"/ca.crt",
			"--cluster-signing-cert-file="+pki+"/ca.crt", "--cluster-signing-key-file="+pki+"/ca.key",
			"--service-account-private-key-file="+pki+"/sa.key",
			"--use-service-account-credentials=true",
			"--leader-elect=false",
			// The defaults (20 QPS) make garbage collection lag behind e2e churn.
			"--kube-api-qps=200", "--kube-api-burst=400",
		),
		Ready: c.healthz(fmt.Sprintf("https://%s/healthz", spec.Loopback(c.Ports.ControllerManager)), ""),
	}
}

func (c *Cluster) scheduler(bin string) proc.Component {
	return proc.Component{
		Name: "kube-scheduler", Exe: bin + "/kube-scheduler", Timeout: time.Minute,
		Addrs: []string{spec.Loopback(c.Ports.Scheduler)},
		Args: append(c.secureServingArgs("kube-scheduler", c.Ports.Scheduler, "scheduler-serving"),
			"--leader-elect=false",
			// The default client QPS (50) caps scheduling near 50 pods/s.
			"--kube-api-qps=1000", "--kube-api-burst=2000",
		),
		Ready: c.healthz(fmt.Sprintf("https://%s/healthz", spec.Loopback(c.Ports.Scheduler)), ""),
	}
}

// secureServingArgs are the flags kube-controller-manager and kube-scheduler share: their
// kubeconfig for the API and for delegated authn/authz, and HTTPS on loopback port with the
// <cert>.crt/.key pair of our CA.
func (c *Cluster) secureServingArgs(component string, port int, cert string) []string {
	pki, kc := c.Path("pki"), c.KubeconfigFor(component)
	return []string{
		"--kubeconfig=" + kc, "--authentication-kubeconfig=" + kc, "--authorization-kubeconfig=" + kc,
		"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(port),
		"--tls-cert-file=" + pki + "/" + cert + ".crt", "--tls-private-key-file=" + pki + "/" + cert + ".key",
		"--client-ca-file=" + pki + "/ca.crt",
	}
}

// healthz checks an HTTPS health endpoint served with a certificate of our CA, presenting the
// client certificate of identity when one is given.
func (c *Cluster) healthz(url, identity string) func(context.Context) error {
	return func(ctx context.Context) error {
		tc, err := pki.TLSConfig(c.Config, identity)
		if err != nil {
			return err
		}
		return proc.HTTPOK(ctx, tc, url, "ok")
	}
}
