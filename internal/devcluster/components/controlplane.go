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

func etcd(e Env) proc.Component {
	bin := e.Bins.K8s
	client := "http://" + spec.Loopback(e.Cfg.Ports.EtcdClient)
	peer := "http://" + spec.Loopback(e.Cfg.Ports.EtcdPeer)
	return proc.Component{
		Name: "etcd", Exe: bin + "/etcd", Timeout: time.Minute,
		Addrs: []string{spec.Loopback(e.Cfg.Ports.EtcdClient), spec.Loopback(e.Cfg.Ports.EtcdPeer)},
		Args: []string{
			"--name=dev", "--data-dir=" + e.Cfg.Path("etcd"),
			"--listen-client-urls=" + client, "--advertise-client-urls=" + client,
			"--listen-peer-urls=" + peer, "--initial-advertise-peer-urls=" + peer,
			"--initial-cluster=dev=" + peer,
			// A throwaway dev cluster: durability is not worth the fsync latency.
			"--unsafe-no-fsync", "--quota-backend-bytes=8589934592", "--log-level=warn",
		},
		Ready: func(ctx context.Context) error { return proc.HTTPOK(ctx, nil, client+"/health", `"health":"true"`) },
	}
}

func apiserver(e Env) proc.Component {
	bin := e.Bins.K8s
	pki := e.Cfg.Path("pki")
	return proc.Component{
		Name: "kube-apiserver", Exe: bin + "/kube-apiserver", Timeout: 2 * time.Minute,
		Addrs: []string{spec.BridgeAddr(e.Cfg.Ports.APIServer)},
		Args: []string{
			"--etcd-servers=http://" + spec.Loopback(e.Cfg.Ports.EtcdClient),
			// On the bridge only: the host and the pods (the kubernetes Service's endpoint is
			// the advertise address) reach it there, nothing off this machine does.
			"--bind-address=" + spec.BridgeIP, "--advertise-address=" + spec.BridgeIP,
			"--secure-port=" + strconv.Itoa(e.Cfg.Ports.APIServer),
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
		Ready: healthz(e, e.Cfg.APIServerURL()+"/readyz", "admin"),
	}
}

func controllerManager(e Env) proc.Component {
	bin := e.Bins.K8s
	pki := e.Cfg.Path("pki")
	return proc.Component{
		Name: "kube-controller-manager", Exe: bin + "/kube-controller-manager", Timeout: time.Minute,
		Addrs: []string{spec.Loopback(e.Cfg.Ports.ControllerManager)},
		Args: append(secureServingArgs(e, "kube-controller-manager", e.Cfg.Ports.ControllerManager, "kcm-serving"),
			"--root-ca-file="+pki+"/ca.crt",
			"--cluster-signing-cert-file="+pki+"/ca.crt", "--cluster-signing-key-file="+pki+"/ca.key",
			"--service-account-private-key-file="+pki+"/sa.key",
			"--use-service-account-credentials=true",
			"--leader-elect=false",
			// The defaults (20 QPS) make garbage collection lag behind e2e churn.
			"--kube-api-qps=200", "--kube-api-burst=400",
		),
		Ready: healthz(e, fmt.Sprintf("https://%s/healthz", spec.Loopback(e.Cfg.Ports.ControllerManager)), ""),
	}
}

func scheduler(e Env) proc.Component {
	bin := e.Bins.K8s
	return proc.Component{
		Name: "kube-scheduler", Exe: bin + "/kube-scheduler", Timeout: time.Minute,
		Addrs: []string{spec.Loopback(e.Cfg.Ports.Scheduler)},
		Args: append(secureServingArgs(e, "kube-scheduler", e.Cfg.Ports.Scheduler, "scheduler-serving"),
			"--leader-elect=false",
			// The default client QPS (50) caps scheduling near 50 pods/s.
			"--kube-api-qps=1000", "--kube-api-burst=2000",
		),
		Ready: healthz(e, fmt.Sprintf("https://%s/healthz", spec.Loopback(e.Cfg.Ports.Scheduler)), ""),
	}
}

// secureServingArgs are the flags kube-controller-manager and kube-scheduler share: their
// kubeconfig for the API and for delegated authn/authz, and HTTPS on loopback port with the
// <cert>.crt/.key pair of our CA.
func secureServingArgs(e Env, component string, port int, cert string) []string {
	pki, kc := e.Cfg.Path("pki"), e.Cfg.KubeconfigFor(component)
	return []string{
		"--kubeconfig=" + kc, "--authentication-kubeconfig=" + kc, "--authorization-kubeconfig=" + kc,
		"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(port),
		"--tls-cert-file=" + pki + "/" + cert + ".crt", "--tls-private-key-file=" + pki + "/" + cert + ".key",
		"--client-ca-file=" + pki + "/ca.crt",
	}
}

// healthz checks an HTTPS health endpoint served with a certificate of our CA, presenting the
// client certificate of identity when one is given.
func healthz(e Env, url, identity string) func(context.Context) error {
	return func(ctx context.Context) error {
		tc, err := pki.TLSConfig(e.Cfg, identity)
		if err != nil {
			return err
		}
		return proc.HTTPOK(ctx, tc, url, "ok")
	}
}
