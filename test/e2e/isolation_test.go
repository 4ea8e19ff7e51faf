//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/spec"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
	"github.com/agent-sandbox/agent-sandbox/pkg/sdk"
)

// The isolation a tenant's code meets inside a sandbox (docs/security.md): each check runs as
// the tenant, through the router, in a sandbox of the agent server's hardened template (read-only root
// filesystem, emptyDir /tmp and /workspace) in a namespace enforcing Pod Security "restricted",
// on the cluster's default runtime class for templates (gVisor unless the cluster was brought
// up with --sandbox-runtime runc).

// newRestrictedNamespace is a namespace whose pods must pass Pod Security "restricted".
func newRestrictedNamespace(t *testing.T, prefix string) string {
	t.Helper()
	ns := newNamespace(t, prefix)
	obj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
	patch := client.RawPatch("application/merge-patch+json",
		[]byte(`{"metadata":{"labels":{"pod-security.kubernetes.io/enforce":"restricted"}}}`))
	mustf(t, kube.Patch(t.Context(), obj, patch), "labelling %s restricted", ns)
	return ns
}

// hardenedTemplate is the agent server's SandboxTemplate: the runtime image on a read-only root
// filesystem with writable emptyDirs at /tmp and /workspace, every capability dropped, non-root.
func hardenedTemplate(ns, name string) *extv1alpha1.SandboxTemplate {
	c := runtimeContainer()
	c.SecurityContext = &corev1.SecurityContext{
		ReadOnlyRootFilesystem:   ptr.To(true),
		RunAsNonRoot:             ptr.To(true),
		AllowPrivilegeEscalation: ptr.To(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
	c.VolumeMounts = []corev1.VolumeMount{{Name: "tmp", MountPath: "/tmp"}, {Name: "workspace", MountPath: "/workspace"}}
	tmpl := testwrap.MakeTemplate(ns, name).Containers(c).TerminationGracePeriod(5).Obj()
	for _, v := range []string{"tmp", "workspace"} {
		tmpl.Spec.PodTemplate.Spec.Volumes = append(tmpl.Spec.PodTemplate.Spec.Volumes,
			corev1.Volume{Name: v, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	}
	return tmpl
}

// isolationCheck is one attack: a script the tenant runs and what its result must show.
type isolationCheck struct {
	name   string
	gVisor bool // holds only under gVisor (runc shares the node's kernel)
	script string
	expect func(res *sdk.Result) error
}

func isolationChecks(nodeKernel string) []isolationCheck {
	// refused: the attempt ran and failed; a missing or unrunnable tool (126, 127) proves nothing.
	refused := func(res *sdk.Result) error {
		switch res.ExitCode {
		case 0:
			return fmt.Errorf("it succeeded (stdout %q)", res.Stdout)
		case 126, 127:
			return fmt.Errorf("the tool did not run (exit %d): the check proves nothing", res.ExitCode)
		}
		return nil
	}
	return []isolationCheck{
		{name: "it runs as the non-root sandbox user with no capabilities",
			script: `id -u; grep CapEff /proc/self/status`,
			expect: func(res *sdk.Result) error {
				if want := "1000\nCapEff:\t0000000000000000\n"; res.Stdout != want {
					return fmt.Errorf("stdout %q, want %q", res.Stdout, want)
				}
				return nil
			}},
		{name: "the kernel it sees is gVisor's, not the node's", gVisor: true,
			script: `uname -r; dmesg 2>&1 | head -3`,
			expect: func(res *sdk.Result) error {
				release := strings.SplitN(res.Stdout, "\n", 2)[0]
				if release == nodeKernel || !strings.Contains(res.Stdout, "gVisor") {
					return fmt.Errorf("uname -r %q (the node runs %q) and dmesg %q, want gVisor's", release, nodeKernel, res.Stdout)
				}
				return nil
			}},
		{name: "the node's processes and other sandboxes' are invisible",
			script: `for p in /proc/[0-9]*; do tr '\0' ' ' < $p/cmdline; echo; done`,
			expect: func(res *sdk.Result) error {
				for _, host := range []string{"kubelet", "containerd", "kube-apiserver", "etcd", "cilium-agent"} {
					if strings.Contains(res.Stdout, host) {
						return fmt.Errorf("a %s process is visible:\n%s", host, res.Stdout)
					}
				}
				// Two sandboxes run on this one node; only its own sandboxd is visible.
				if n := strings.Count(res.Stdout, "/usr/local/bin/sandboxd"); n != 1 {
					return fmt.Errorf("%d sandboxd processes visible, want only its own:\n%s", n, res.Stdout)
				}
				return nil
			}},
		{name: "a kernel module cannot be loaded",
			// Refused before the kernel reads the file: a privileged insmod would fail on its
			// format instead.
			script: `printf 'not a module' > /tmp/m.ko && insmod /tmp/m.ko`,
			expect: func(res *sdk.Result) error {
				if err := refused(res); err != nil {
					return err
				}
				if strings.Contains(res.Stderr, "format") {
					return fmt.Errorf("the kernel parsed the module (stderr %q): loading was permitted", res.Stderr)
				}
				return nil
			}},
		{name: "nothing can be mounted",
			script: `mkdir -p /tmp/mnt && mount -t tmpfs none /tmp/mnt`, expect: refused},
		{name: "no raw socket can be opened",
			script: `traceroute -n -m 1 127.0.0.1`, expect: refused},
		{name: "no process outside the sandbox can be traced",
			// PTRACE_ATTACH to the test process itself, which runs on the node.
			script: fmt.Sprintf(`python3 -c 'import ctypes,sys; libc=ctypes.CDLL(None, use_errno=True); `+
				`sys.exit(0 if libc.ptrace(16, %d, 0, 0) == 0 else 1)'`, os.Getpid()),
			expect: refused},
		{name: "only /workspace and /tmp are writable",
			script: `for p in /x /etc/x /usr/local/bin/x /home/sandbox/x; do touch $p 2>/dev/null && echo wrote $p; done; ` +
				`touch /workspace/x /tmp/x && echo writable`,
			expect: func(res *sdk.Result) error {
				if res.Stdout != "writable\n" {
					return fmt.Errorf("stdout %q, want only %q", res.Stdout, "writable\n")
				}
				return nil
			}},
		{name: "no Kubernetes credentials are mounted",
			script: `ls /var/run/secrets/kubernetes.io/serviceaccount`, expect: refused},
	}
}

func TestASandboxIsIsolatedFromTheNodeAndOtherSandboxes(t *testing.T) {
	t.Parallel()
	ns := newRestrictedNamespace(t, "isolation")
	mustf(t, kube.Create(t.Context(), hardenedTemplate(ns, "hardened")), "creating the template")
	cli := sdkClientAs(t, ns, tenantConfig(t, ns))
	var sandboxes []*sdk.Sandbox
	for range 2 {
		sb, err := cli.Create(t.Context(), "hardened", sdk.WithWarmPool("none"))
		mustf(t, err, "creating a sandbox as the tenant")
		t.Cleanup(func() { _ = sb.Delete(t.Context()) })
		sandboxes = append(sandboxes, sb)
	}
	attacker := sandboxes[0]
	pod, err := podOf(t.Context(), ns, attacker.SandboxName())
	mustf(t, err, "reading the sandbox's pod")
	underGVisor := ptr.Deref(pod.Spec.RuntimeClassName, "") == spec.SandboxRuntimeGVisor
	// The local cluster runs template pods on gVisor unless it was brought up on runc.
	if os.Getenv(spec.SandboxRuntimeEnv) != spec.SandboxRuntimeRunc && !underGVisor {
		t.Fatalf("the sandbox's pod runs under runtime class %q, want %s: the controller's default did not apply",
			ptr.Deref(pod.Spec.RuntimeClassName, ""), spec.SandboxRuntimeGVisor)
	}
	var uts unix.Utsname
	mustf(t, unix.Uname(&uts), "uname")
	for _, tc := range isolationChecks(unix.ByteSliceToString(uts.Release[:])) {
		t.Run(tc.name, func(t *testing.T) {
			if tc.gVisor && !underGVisor {
				t.Skipf("the sandbox runs under runtime class %q, not gvisor: it shares the node's kernel", ptr.Deref(pod.Spec.RuntimeClassName, ""))
			}
			res, err := attacker.Run(t.Context(), sdk.Shell(tc.script))
			mustf(t, err, "running %q", tc.script)
			if err := tc.expect(res); err != nil {
				t.Errorf("%s: %v (exit %d, stderr %q)", tc.script, err, res.ExitCode, res.Stderr)
			}
		})
	}
}

// The runAsNonRoot default meets images that run as root: the kubelet refuses to start them and
// the Sandbox says why; a template that means it (runAsUser: 0) starts.
func TestATemplateWhoseImageRunsAsRootIsNamedUnlessItSaysSo(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t, "rootimage")
	// The pause image has no USER: it runs as root.
	rootImage := corev1.Container{Name: "app", Image: "docker.io/" + spec.PauseImage, ImagePullPolicy: corev1.PullNever}
	cases := []struct {
		name      string
		podSC     *corev1.PodSecurityContext
		wantReady bool
	}{
		{"a template that says nothing is refused, naming the reason", nil, false},
		{"a template that runs as uid 0 on purpose starts", &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](0)}, true},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			name := fmt.Sprintf("root-%d", i)
			tmpl := testwrap.MakeTemplate(ns, name).Containers(rootImage).PodSecurity(tc.podSC).TerminationGracePeriod(1).Obj()
			mustf(t, kube.Create(t.Context(), tmpl), "creating template")
			mustf(t, kube.Create(t.Context(), testwrap.MakeClaim(ns, name).Template(name).WarmPool("none").Obj()), "creating claim")
			slow.EventuallyContext(t, "the Sandbox's Ready condition", func(ctx context.Context) error {
				sb, err := sandboxOf(ctx, ns, name)
				if err != nil {
					return err
				}
				c := meta.FindStatusCondition(sb.Status.Conditions, agentsv1alpha1.SandboxConditionReady)
				switch {
				case c == nil:
					return errors.New("no Ready condition yet")
				case tc.wantReady && c.Status != metav1.ConditionTrue:
					return fmt.Errorf("Ready=%s (%s), want True", c.Status, c.Message)
				case !tc.wantReady && !strings.Contains(c.Message, "runAsNonRoot"):
					return fmt.Errorf("Ready=%s (%q), want a message naming runAsNonRoot", c.Status, c.Message)
				}
				return nil
			})
		})
	}
}
