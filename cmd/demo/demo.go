package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/spec"
	"github.com/agent-sandbox/agent-sandbox/pkg/sdk"
)

const (
	demoNS       = "sandbox-demo"
	templateName = "demo-runtime"
	poolName     = "demo-pool"
	poolSize     = 2
)

// timing is one line of the closing summary.
type timing struct {
	what string
	took time.Duration
}

type demo struct {
	out     io.Writer
	cli     *sdk.Client
	kube    client.Client
	timings []timing
}

func (d *demo) say(format string, args ...any) { fmt.Fprintf(d.out, "--> "+format+"\n", args...) }

func (d *demo) timed(what string, f func() error) error {
	start := time.Now()
	err := f()
	if err == nil {
		took := time.Since(start)
		d.timings = append(d.timings, timing{what, took})
		d.say("%s: %s", what, took.Round(time.Millisecond))
	}
	return err
}

// runDemo brings the cluster up and walks the product's main path with the SDK.
func runDemo(ctx context.Context, out io.Writer, cfg spec.Config, compareRounds int) error {
	d := &demo{out: out}
	var cl *devcluster.Cluster
	if err := d.timed("cluster up", func() (err error) {
		cl, err = devcluster.Up(ctx, cfg)
		return err
	}); err != nil {
		return err
	}
	cli, err := sdk.New(sdk.Options{Kubeconfig: cl.Kubeconfig, RouterURL: cl.RouterURL, RouterToken: cl.RouterToken, Namespace: demoNS, Mode: sdk.ModeRouter})
	if err != nil {
		return err
	}
	defer cli.Close()
	d.cli = cli
	if d.kube, err = newKubeClient(cli); err != nil {
		return err
	}
	if err := cli.CheckCluster(ctx); err != nil {
		return fmt.Errorf("cluster check: %w", err)
	}
	if err := d.setup(ctx); err != nil {
		return err
	}

	var warm *sdk.Sandbox
	if err := d.timed("warm claim -> ready", func() (err error) {
		// The claim's env rides to sandboxd: still a warm start (the template runs sandboxd).
		warm, err = cli.Create(ctx, templateName, sdk.WithWarmPool("default"), sdk.WithLabels(map[string]string{"demo": "warm"}),
			sdk.WithEnv(map[string]string{"DEMO_SESSION": "session-1"}))
		return err
	}); err != nil {
		return err
	}
	defer func() { _ = warm.Delete(context.Background()) }()
	d.say("claim %s got sandbox %s at pod IP %s", warm.Name(), warm.SandboxName(), warm.PodIP())
	if err := d.work(ctx, warm); err != nil {
		return err
	}
	if err := d.pauseResume(ctx, warm); err != nil {
		return err
	}

	var cold *sdk.Sandbox
	if err := d.timed("cold claim -> ready", func() (err error) {
		cold, err = cli.Create(ctx, templateName, sdk.WithWarmPool("none"), sdk.WithLabels(map[string]string{"demo": "cold"}))
		if err != nil {
			return err
		}
		return untilRouted(ctx, cold)
	}); err != nil {
		return err
	}
	defer func() { _ = cold.Delete(context.Background()) }()
	res, err := cold.Run(ctx, sdk.Shell("echo cold sandbox $(hostname) is up"))
	if err != nil {
		return err
	}
	d.say("cold sandbox says: %s", strings.TrimSpace(res.Stdout))

	fmt.Fprintf(out, "\n%-28s %s\n", "STEP", "TOOK")
	for _, t := range d.timings {
		fmt.Fprintf(out, "%-28s %s\n", t.what, t.took.Round(time.Millisecond))
	}
	if compareRounds > 0 {
		if err := d.compareRuntimes(ctx, compareRounds); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "\nThe cluster keeps running: export KUBECONFIG=%s\nStop it and clean up with: make dev-down\n", cl.Kubeconfig)
	return nil
}

// setup applies the namespace, a template with a PVC home, and a warm pool, then waits until
// the pool is full.
func (d *demo) setup(ctx context.Context) error {
	// Every pod in it must pass Pod Security "restricted": the template's pods do, hardened by
	// the controller's defaults.
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: demoNS}}
	if err := upsert(ctx, d.kube, ns, func() {
		metav1.SetMetaDataLabel(&ns.ObjectMeta, "pod-security.kubernetes.io/enforce", "restricted")
	}); err != nil {
		return err
	}
	tmpl := &extv1alpha1.SandboxTemplate{ObjectMeta: metav1.ObjectMeta{Name: templateName, Namespace: demoNS}}
	if err := upsert(ctx, d.kube, tmpl, func() {
		tmpl.Spec = templateSpec()
		// Claims' env goes to the sandboxd of container runtime, so claims with env start warm.
		metav1.SetMetaDataAnnotation(&tmpl.ObjectMeta, extv1alpha1.SandboxdContainerAnnotation, "runtime")
	}); err != nil {
		return err
	}
	pool := &extv1alpha1.SandboxWarmPool{ObjectMeta: metav1.ObjectMeta{Name: poolName, Namespace: demoNS}}
	if err := upsert(ctx, d.kube, pool, func() {
		pool.Spec.Replicas = poolSize
		pool.Spec.TemplateRef = extv1alpha1.SandboxTemplateRef{Name: templateName}
	}); err != nil {
		return err
	}
	d.say("applied SandboxTemplate %s (runtime image, 1Gi PVC home) and SandboxWarmPool %s (%d)", templateName, poolName, poolSize)
	return d.timed("warm pool filled", func() error { return waitPool(ctx, d.kube, poolName, d.out) })
}

func templateSpec() extv1alpha1.SandboxTemplateSpec {
	return extv1alpha1.SandboxTemplateSpec{
		EnvVarsInjectionPolicy: extv1alpha1.EnvVarsInjectionPolicyAllowed,
		PodTemplate: agentsv1alpha1.PodTemplate{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name:            "runtime",
				Image:           spec.RuntimeImage,
				ImagePullPolicy: corev1.PullNever,
				Ports:           []corev1.ContainerPort{{Name: "sandboxd", ContainerPort: 8888}},
				ReadinessProbe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr8888}},
					PeriodSeconds: 1, TimeoutSeconds: 5, // generous: a busy 2-core machine answers slowly
				},
				VolumeMounts: []corev1.VolumeMount{{Name: "home", MountPath: "/workspace/home"}},
			}},
			TerminationGracePeriodSeconds: ptr.To[int64](5),
		}},
		VolumeClaimTemplates: []agentsv1alpha1.PersistentVolumeClaimTemplate{{
			EmbeddedObjectMetadata: agentsv1alpha1.EmbeddedObjectMetadata{Name: "home"},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			},
		}},
	}
}

// work runs commands and moves nested files through the router.
func (d *demo) work(ctx context.Context, sb *sdk.Sandbox) error {
	res, err := sb.Run(ctx, sdk.Shell(`echo "hello from $(hostname) (DEMO_SESSION=${DEMO_SESSION-unset})"; uname -sr; echo "cwd: $(pwd)"; `+
		`python3 -c 'import platform; print("python", platform.python_version())' 2>/dev/null || echo "python3: not in this image"`))
	if err != nil {
		return err
	}
	if err := res.Err(); err != nil {
		return err
	}
	d.say("command output (through the router, %s):\n%s", res.Duration.Round(time.Millisecond), indent(res.Stdout))
	const nested = "projects/demo/src/notes/todo.txt"
	if err := sb.Files().Write(ctx, nested, []byte("write a demo\nrun it\n"), 0); err != nil {
		return err
	}
	got, err := sb.Files().Read(ctx, nested)
	if err != nil {
		return err
	}
	d.say("wrote and read back %s:\n%s", nested, indent(string(got)))
	res, err = sb.Run(ctx, sdk.Shell("find projects -type f | sort; wc -l "+nested))
	if err != nil {
		return err
	}
	d.say("the sandbox sees:\n%s", indent(res.Stdout))
	return nil
}

// pauseResume writes a file on the PVC home, pauses (pod deleted, PVC kept), resumes on a new
// pod and reads the file back.
func (d *demo) pauseResume(ctx context.Context, sb *sdk.Sandbox) error {
	stamp := fmt.Sprintf("written before pause at %s\n", time.Now().Format(time.RFC3339))
	if err := sb.Files().Write(ctx, "home/keep.txt", []byte(stamp), 0); err != nil {
		return err
	}
	before := sb.PodIP()
	if err := d.timed("pause -> not ready", func() error {
		if err := sb.Pause(ctx); err != nil {
			return err
		}
		return waitPaused(ctx, d.kube, sb.Namespace(), sb.SandboxName())
	}); err != nil {
		return err
	}
	if _, err := sb.Run(ctx, sdk.Shell("true")); !errors.Is(err, sdk.ErrNotReady) {
		return fmt.Errorf("a paused sandbox should refuse commands with ErrNotReady, got %v", err)
	}
	d.say("paused: the pod is going away, commands answer %q", "sandbox not ready")
	if err := d.timed("resume -> ready", func() error {
		if err := sb.Resume(ctx); err != nil {
			return err
		}
		return untilRouted(ctx, sb)
	}); err != nil {
		return err
	}
	got, err := sb.Files().Read(ctx, "home/keep.txt")
	if err != nil {
		return err
	}
	if string(got) != stamp {
		return fmt.Errorf("PVC file changed across pause/resume: %q", got)
	}
	d.say("resumed on a new pod (%s -> %s); home/keep.txt survived on the PVC: %s", before, sb.PodIP(), strings.TrimSpace(string(got)))
	return nil
}

func indent(s string) string {
	return "      " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n      ")
}
