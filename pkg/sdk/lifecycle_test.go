package sdk

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
	"github.com/agent-sandbox/agent-sandbox/internal/testenv"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
	"github.com/agent-sandbox/agent-sandbox/pkg/sdk/sdktest"
)

var nsCounter atomic.Int32

// newClusterClient returns a Client on the shared API server, in a fresh
// namespace. The test itself plays the controllers.
func newClusterClient(t *testing.T, mode Mode, mods ...func(*Options)) *Client {
	t.Helper()
	if env == nil {
		testenv.Require(t)
	}
	ns := fmt.Sprintf("sdk-%d-%s", nsCounter.Add(1), strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name())))
	if len(ns) > 63 {
		ns = strings.TrimRight(ns[:63], "-")
	}
	if err := env.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	o := Options{RESTConfig: env.Config, Namespace: ns, Mode: mode}
	for _, m := range mods {
		m(&o)
	}
	c, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// progressLog records WithProgress reports and lets the test wait for one.
type progressLog struct{ ch chan Progress }

func newProgressLog() *progressLog { return &progressLog{ch: make(chan Progress, 256)} }

func (p *progressLog) option() ProgressOption {
	return WithProgress(func(pr Progress) {
		select {
		case p.ch <- pr:
		default:
		}
	})
}

// waitFor returns the first report matching ok, failing the test when none comes within
// testwrap.DefaultTimeout.
func (p *progressLog) waitFor(t *testing.T, ok func(Progress) bool) Progress {
	t.Helper()
	timeout := time.After(testwrap.DefaultTimeout)
	for {
		select {
		case pr, open := <-p.ch:
			if !open {
				t.Fatal("progress channel closed")
			}
			if ok(pr) {
				return pr
			}
		case <-timeout:
			t.Fatalf("no matching progress report within %s", testwrap.DefaultTimeout)
		}
	}
}

func key(c *Client, name string) client.ObjectKey {
	return client.ObjectKey{Namespace: c.Namespace(), Name: name}
}

type createResult struct {
	sb  *Sandbox
	err error
}

// TestCreateWaitsForPodIPs: Create returns only once the controller (the
// test) has written pod IPs, and the claim carries every option.
func TestCreateWaitsForPodIPs(t *testing.T) {
	ctx := testCtx(t)
	c := newClusterClient(t, ModeDirect)
	prog := newProgressLog()
	done := make(chan createResult, 1)
	before := time.Now()
	go func() {
		sb, err := c.Create(ctx, "python", WithName("conv-1"),
			WithLabels(map[string]string{"cognition.io/session": "s1"}),
			WithAnnotations(map[string]string{"note": "x"}),
			WithEnv(map[string]string{"B": "2", "A": "1"}),
			WithWarmPool("none"), WithTTL(time.Hour), WithShutdownPolicy(extv1alpha1.ShutdownPolicyDelete),
			WithPodLabels(map[string]string{"sandbox.users.io/team": "a"}),
			WithPodAnnotations(map[string]string{"sandbox.users.io/why": "test"}),
			prog.option())
		done <- createResult{sb, err}
	}()

	prog.waitFor(t, func(p Progress) bool { return p.Reason == reasonPending })
	// Not ready yet: a Sandbox name but no IP.
	if err := sdktest.MarkClaim(ctx, env.Client, key(c, "conv-1"), "conv-1", nil, metav1.ConditionFalse, "PodPending", "pulling image"); err != nil {
		t.Fatal(err)
	}
	prog.waitFor(t, func(p Progress) bool { return p.Reason == "PodPending" && p.Message == "pulling image" })
	select {
	case r := <-done:
		t.Fatalf("Create returned before pod IPs were set: %+v", r)
	default:
	}
	if err := sdktest.MarkClaim(ctx, env.Client, key(c, "conv-1"), "conv-1", []string{"10.1.2.3"}, metav1.ConditionTrue, "DependenciesReady", ""); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.sb.Name() != "conv-1" || r.sb.SandboxName() != "conv-1" || r.sb.PodIP() != "10.1.2.3" || !r.sb.Status().Ready {
		t.Errorf("handle = %s %s %v %+v", r.sb.Name(), r.sb.SandboxName(), r.sb.PodIPs(), r.sb.Status())
	}

	cl := &extv1alpha1.SandboxClaim{}
	if err := env.Client.Get(ctx, key(c, "conv-1"), cl); err != nil {
		t.Fatal(err)
	}
	if cl.Spec.TemplateRef.Name != "python" || cl.Labels["cognition.io/session"] != "s1" || cl.Annotations["note"] != "x" {
		t.Errorf("claim metadata/template = %+v %+v", cl.ObjectMeta, cl.Spec.TemplateRef)
	}
	wantEnv := []extv1alpha1.EnvVar{{Name: "A", Value: "1"}, {Name: "B", Value: "2"}}
	if !slices.Equal(cl.Spec.Env, wantEnv) {
		t.Errorf("env = %+v", cl.Spec.Env)
	}
	if cl.Spec.WarmPool == nil || *cl.Spec.WarmPool != "none" {
		t.Errorf("warmpool = %v", cl.Spec.WarmPool)
	}
	if lc := cl.Spec.Lifecycle; lc == nil || lc.ShutdownTime == nil || lc.ShutdownPolicy != extv1alpha1.ShutdownPolicyDelete ||
		lc.ShutdownTime.Time.Before(before.Add(time.Hour).Truncate(time.Second)) || lc.ShutdownTime.Time.After(time.Now().Add(time.Hour+time.Second)) {
		t.Errorf("lifecycle = %+v", cl.Spec.Lifecycle)
	}
	if cl.Spec.AdditionalPodMetadata.Labels["sandbox.users.io/team"] != "a" || cl.Spec.AdditionalPodMetadata.Annotations["sandbox.users.io/why"] != "test" {
		t.Errorf("additionalPodMetadata = %+v", cl.Spec.AdditionalPodMetadata)
	}
}

func TestCreateGeneratesName(t *testing.T) {
	ctx := testCtx(t)
	c := newClusterClient(t, ModeDirect)
	sb, err := c.Create(ctx, "python", NoWait())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(sb.Name(), "python-") || len(sb.Name()) <= len("python-") {
		t.Errorf("name = %q", sb.Name())
	}
	if _, err := c.Create(ctx, "python", WithName(sb.Name()), NoWait()); !errors.Is(err, ErrAlreadyExists) {
		t.Errorf("duplicate Create = %v, want ErrAlreadyExists", err)
	}
	if _, err := c.Create(ctx, ""); err == nil {
		t.Error("Create without a template succeeded")
	}
}

// TestCreateTimeoutReportsLastReason: the error wraps ErrTimeout and names
// the last Ready reason; the claim made by Create is removed again.
func TestCreateTimeoutReportsLastReason(t *testing.T) {
	ctx := testCtx(t)
	c := newClusterClient(t, ModeDirect)
	prog := newProgressLog()
	done := make(chan createResult, 1)
	go func() {
		sb, err := c.Create(ctx, "missing-template", WithName("t1"), WithReadyTimeout(2*time.Second), prog.option())
		done <- createResult{sb, err}
	}()
	prog.waitFor(t, func(p Progress) bool { return p.Reason == reasonPending })
	if err := sdktest.MarkClaim(ctx, env.Client, key(c, "t1"), "", nil, metav1.ConditionFalse,
		extv1alpha1.ReasonTemplateNotFound, `SandboxTemplate "missing-template" not found`); err != nil {
		t.Fatal(err)
	}
	r := <-done
	var we *WaitError
	if !errors.Is(r.err, ErrTimeout) || !errors.As(r.err, &we) {
		t.Fatalf("err = %v, want a *WaitError wrapping ErrTimeout", r.err)
	}
	if we.Reason != extv1alpha1.ReasonTemplateNotFound || !strings.Contains(r.err.Error(), "TemplateNotFound") {
		t.Errorf("reason = %q, message %q", we.Reason, r.err)
	}
	err := env.Client.Get(ctx, key(c, "t1"), &extv1alpha1.SandboxClaim{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("claim after failed Create: %v, want it deleted", err)
	}
}

// TestWaitTimeoutAdoptedClaim: GetOrCreate on an existing claim already
// stuck in a reason times out with that reason, and keeps the claim (it did
// not create it).
func TestWaitTimeoutAdoptedClaim(t *testing.T) {
	ctx := testCtx(t)
	c := newClusterClient(t, ModeDirect)
	if err := env.Client.Create(ctx, testwrap.MakeClaim(c.Namespace(), "stuck").Template("py").Obj()); err != nil {
		t.Fatal(err)
	}
	if err := sdktest.MarkClaim(ctx, env.Client, key(c, "stuck"), "", nil, metav1.ConditionFalse, extv1alpha1.ReasonTemplateNotFound, "no template"); err != nil {
		t.Fatal(err)
	}
	_, err := c.GetOrCreate(ctx, "stuck", "py", WithReadyTimeout(300*time.Millisecond))
	var we *WaitError
	if !errors.Is(err, ErrTimeout) || !errors.As(err, &we) || we.Reason != extv1alpha1.ReasonTemplateNotFound || we.Message != "no template" {
		t.Fatalf("err = %v", err)
	}
	if err := env.Client.Get(ctx, key(c, "stuck"), &extv1alpha1.SandboxClaim{}); err != nil {
		t.Errorf("adopted claim was deleted: %v", err)
	}
}

func TestWaitCallerDeadline(t *testing.T) {
	c := newClusterClient(t, ModeDirect)
	ctx, cancel := context.WithTimeout(testCtx(t), 300*time.Millisecond)
	defer cancel()
	_, err := c.Create(ctx, "py", WithName("dl"), KeepOnFailure())
	if !errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want ErrTimeout and DeadlineExceeded", err)
	}
	if err := env.Client.Get(testCtx(t), key(c, "dl"), &extv1alpha1.SandboxClaim{}); err != nil {
		t.Errorf("KeepOnFailure claim: %v", err)
	}
}

func TestWaitClaimDeleted(t *testing.T) {
	ctx := testCtx(t)
	c := newClusterClient(t, ModeDirect)
	prog := newProgressLog()
	done := make(chan createResult, 1)
	go func() {
		sb, err := c.Create(ctx, "py", WithName("gone"), prog.option())
		done <- createResult{sb, err}
	}()
	prog.waitFor(t, func(p Progress) bool { return true })
	if err := env.Client.Delete(ctx, testwrap.MakeClaim(c.Namespace(), "gone").Template("tmpl").Obj()); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if !errors.Is(r.err, ErrNotFound) {
		t.Fatalf("err = %v, want ErrNotFound", r.err)
	}
}

// Reasons that waiting cannot fix end the wait at once, not at the ready timeout.
func TestWaitClaimFinalReasons(t *testing.T) {
	for _, reason := range []string{extv1alpha1.ReasonClaimExpired, extv1alpha1.ReasonInvalidMetadata} {
		t.Run(reason, func(t *testing.T) {
			ctx := testCtx(t)
			c := newClusterClient(t, ModeDirect)
			if err := env.Client.Create(ctx, testwrap.MakeClaim(c.Namespace(), "old").Template("tmpl").Obj()); err != nil {
				t.Fatal(err)
			}
			if err := sdktest.MarkClaim(ctx, env.Client, key(c, "old"), "old", nil, metav1.ConditionFalse, reason, "final"); err != nil {
				t.Fatal(err)
			}
			_, err := c.GetOrCreate(ctx, "old", "tmpl")
			if !errors.Is(err, ErrNotReady) || errors.Is(err, ErrTimeout) {
				t.Fatalf("err = %v, want ErrNotReady at once", err)
			}
		})
	}
}

// TestGetOrCreate: session reuse by a deterministic name.
func TestGetOrCreate(t *testing.T) {
	ctx := testCtx(t)
	c := newClusterClient(t, ModeDirect)
	if err := env.Client.Create(ctx, testwrap.MakeClaim(c.Namespace(), "session-42").Template("py").Obj()); err != nil {
		t.Fatal(err)
	}
	if err := sdktest.MarkClaim(ctx, env.Client, key(c, "session-42"), "py-pool-x1", []string{"10.0.0.9"}, metav1.ConditionTrue, "DependenciesReady", ""); err != nil {
		t.Fatal(err)
	}
	sb, err := c.GetOrCreate(ctx, "session-42", "py", WithLabels(map[string]string{"ignored": "on-adopt"}))
	if err != nil {
		t.Fatal(err)
	}
	if sb.SandboxName() != "py-pool-x1" || sb.PodIP() != "10.0.0.9" || sb.Template() != "py" {
		t.Errorf("adopted handle: %s %v %s", sb.SandboxName(), sb.PodIPs(), sb.Template())
	}
	var list extv1alpha1.SandboxClaimList
	if err := env.Client.List(ctx, &list, client.InNamespace(c.Namespace())); err != nil || len(list.Items) != 1 {
		t.Errorf("claims = %d, %v; want the one adopted", len(list.Items), err)
	}
	_, err = c.GetOrCreate(ctx, "session-42", "node")
	if !errors.Is(err, ErrTemplateMismatch) || !strings.Contains(err.Error(), `"py"`) {
		t.Errorf("mismatch err = %v", err)
	}

	// A missing one is created, and waited for.
	ctl := sdktest.StartController(t, c.KubeClient(), c.Namespace())
	_ = ctl
	fresh, err := c.GetOrCreate(ctx, "session-43", "py")
	if err != nil {
		t.Fatal(err)
	}
	if fresh.PodIP() != "127.0.0.1" || fresh.Name() != "session-43" {
		t.Errorf("created handle: %s %v", fresh.Name(), fresh.PodIPs())
	}
}

func TestKeepAliveAndShutdownTime(t *testing.T) {
	ctx := testCtx(t)
	c := newClusterClient(t, ModeDirect)
	sb, err := c.Create(ctx, "py", WithName("ka"), WithShutdownPolicy(extv1alpha1.ShutdownPolicyDelete), NoWait())
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	if err := c.KeepAlive(ctx, "ka", 2*time.Hour); err != nil {
		t.Fatal(err)
	}
	cl := &extv1alpha1.SandboxClaim{}
	if err := env.Client.Get(ctx, key(c, "ka"), cl); err != nil {
		t.Fatal(err)
	}
	lc := cl.Spec.Lifecycle
	if lc == nil || lc.ShutdownTime == nil || lc.ShutdownTime.Time.Before(before.Add(2*time.Hour).Truncate(time.Second)) ||
		lc.ShutdownTime.Time.After(time.Now().Add(2*time.Hour+time.Second)) {
		t.Fatalf("lifecycle = %+v", lc)
	}
	if lc.ShutdownPolicy != extv1alpha1.ShutdownPolicyDelete {
		t.Errorf("KeepAlive lost the shutdown policy: %q", lc.ShutdownPolicy)
	}
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := sb.SetShutdownTime(ctx, at); err != nil {
		t.Fatal(err)
	}
	if got := sb.Status().ShutdownTime; !got.Equal(at) {
		t.Errorf("handle shutdown time = %v", got)
	}
	if err := sb.SetShutdownTime(ctx, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Get(ctx, key(c, "ka"), cl); err != nil {
		t.Fatal(err)
	}
	if cl.Spec.Lifecycle != nil && cl.Spec.Lifecycle.ShutdownTime != nil {
		t.Errorf("shutdown time not removed: %v", cl.Spec.Lifecycle.ShutdownTime)
	}
	if err := c.KeepAlive(ctx, "nope", time.Hour); !errors.Is(err, ErrNotFound) {
		t.Errorf("KeepAlive missing = %v", err)
	}
}

// TestPauseResume: Pause and Resume scale the Sandbox named in the claim's
// status (an adopted one, here), and Resume waits for the new pod.
func TestPauseResume(t *testing.T) {
	ctx := testCtx(t)
	c := newClusterClient(t, ModeDirect)
	cl := testwrap.MakeClaim(c.Namespace(), "pr").Template("tmpl").Obj()
	if err := env.Client.Create(ctx, cl); err != nil {
		t.Fatal(err)
	}
	sbObj := sdktest.NewSandboxFor(cl)
	sbObj.Name = "pool-abcde" // adopted from a warm pool: not the claim's name
	if err := env.Client.Create(ctx, sbObj); err != nil {
		t.Fatal(err)
	}
	sbKey := client.ObjectKeyFromObject(sbObj)
	if err := sdktest.MarkSandbox(ctx, env.Client, sbKey, "10.0.0.1"); err != nil {
		t.Fatal(err)
	}
	if err := sdktest.MarkClaim(ctx, env.Client, key(c, "pr"), "pool-abcde", []string{"10.0.0.1"}, metav1.ConditionTrue, "DependenciesReady", ""); err != nil {
		t.Fatal(err)
	}

	if err := c.Pause(ctx, "pr"); err != nil {
		t.Fatal(err)
	}
	got := &agentsv1alpha1.Sandbox{}
	if err := env.Client.Get(ctx, sbKey, got); err != nil || got.DesiredReplicas() != 0 {
		t.Fatalf("after Pause: replicas %d, %v", got.DesiredReplicas(), err)
	}
	if err := sdktest.MarkSandbox(ctx, env.Client, sbKey, ""); err != nil {
		t.Fatal(err)
	}

	prog := newProgressLog()
	done := make(chan createResult, 1)
	go func() {
		sb, err := c.Resume(ctx, "pr", prog.option())
		done <- createResult{sb, err}
	}()
	// The first report comes after the patch; the status is still the paused one.
	prog.waitFor(t, func(p Progress) bool { return p.Kind == "Sandbox" && !p.Ready })
	if err := env.Client.Get(ctx, sbKey, got); err != nil || got.DesiredReplicas() != 1 {
		t.Fatalf("during Resume: replicas %d, %v", got.DesiredReplicas(), err)
	}
	if err := sdktest.MarkSandbox(ctx, env.Client, sbKey, "10.0.0.2"); err != nil {
		t.Fatal(err)
	}
	// The claim controller mirrors the resumed pod onto the claim; Resume waits for that too.
	if err := sdktest.MarkClaim(ctx, env.Client, key(c, "pr"), "pool-abcde", []string{"10.0.0.2"}, metav1.ConditionTrue, "DependenciesReady", ""); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.sb.PodIP() != "10.0.0.2" || r.sb.SandboxName() != "pool-abcde" || r.sb.Status().Paused {
		t.Errorf("after Resume: %v %s %+v", r.sb.PodIPs(), r.sb.SandboxName(), r.sb.Status())
	}
}

func TestListByLabels(t *testing.T) {
	ctx := testCtx(t)
	c := newClusterClient(t, ModeDirect)
	for _, cl := range []*extv1alpha1.SandboxClaim{
		testwrap.MakeClaim(c.Namespace(), "a1").Template("tmpl").Labels(map[string]string{"team": "a", "tier": "dev"}).Obj(),
		testwrap.MakeClaim(c.Namespace(), "a2").Template("tmpl").Labels(map[string]string{"team": "a", "tier": "prod"}).Obj(),
		testwrap.MakeClaim(c.Namespace(), "b1").Template("tmpl").Labels(map[string]string{"team": "b"}).Obj(),
	} {
		if err := env.Client.Create(ctx, cl); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		sel  string
		want []string
	}{
		{"", []string{"a1", "a2", "b1"}},
		{"team=a", []string{"a1", "a2"}},
		{"team=a,tier!=prod", []string{"a1"}},
		{"team in (b,c)", []string{"b1"}},
		{"team=z", nil},
	}
	for _, tc := range tests {
		got, err := c.List(ctx, tc.sel)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, s := range got {
			names = append(names, s.Name())
		}
		if !slices.Equal(names, tc.want) {
			t.Errorf("List(%q) = %v, want %v", tc.sel, names, tc.want)
		}
	}
	if _, err := c.List(ctx, "team in (a"); err == nil {
		t.Error("bad selector accepted")
	}
}

func TestDeleteAndGet(t *testing.T) {
	ctx := testCtx(t)
	c := newClusterClient(t, ModeDirect)
	if err := env.Client.Create(ctx, testwrap.MakeClaim(c.Namespace(), "d1").Template("tmpl").Obj()); err != nil {
		t.Fatal(err)
	}
	sb, err := c.Get(ctx, "d1")
	if err != nil || !sb.IsClaim() {
		t.Fatalf("Get = %v, %v", sb, err)
	}
	if err := c.Delete(ctx, "d1", DeleteOption{Wait: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, "d1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get deleted = %v", err)
	}
	if err := c.Delete(ctx, "d1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Delete missing = %v", err)
	}
	if err := sb.Delete(ctx); err != nil {
		t.Errorf("handle Delete of a deleted claim = %v, want nil (idempotent)", err)
	}
}

// TestRawSandbox covers the harness flow: a Sandbox without a claim, waited
// for, found by Get, paused, deleted.
func TestRawSandbox(t *testing.T) {
	ctx := testCtx(t)
	c := newClusterClient(t, ModeDirect)
	spec := testwrap.MakeSandbox("", "ws-alice").Image("runtime").Obj()
	prog := newProgressLog()
	done := make(chan createResult, 1)
	go func() {
		sb, err := c.GetOrCreateSandbox(ctx, spec, WithLabels(map[string]string{"workspace": "alice"}), WithTTL(time.Hour), prog.option())
		done <- createResult{sb, err}
	}()
	prog.waitFor(t, func(p Progress) bool { return p.Kind == "Sandbox" })
	if err := sdktest.MarkSandbox(ctx, env.Client, key(c, "ws-alice"), "10.9.9.9"); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.sb.IsClaim() || r.sb.Name() != "ws-alice" || r.sb.PodIP() != "10.9.9.9" {
		t.Errorf("handle = %v %s %v", r.sb.IsClaim(), r.sb.Name(), r.sb.PodIPs())
	}
	obj := r.sb.Object()
	if obj.Labels["workspace"] != "alice" || obj.Spec.ShutdownTime == nil {
		t.Errorf("sandbox = %+v", obj.ObjectMeta)
	}
	raws, err := c.ListSandboxes(ctx, "workspace=alice")
	if err != nil || len(raws) != 1 {
		t.Errorf("ListSandboxes = %v, %v", raws, err)
	}
	got, err := c.Get(ctx, "ws-alice")
	if err != nil || got.IsClaim() {
		t.Fatalf("Get raw = %v, %v", got, err)
	}
	if err := got.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	if !got.Status().Paused {
		t.Error("not paused")
	}
	if err := c.KeepAlive(ctx, "ws-alice", time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, "ws-alice"); err != nil {
		t.Fatal(err)
	}
}

func TestCheckCluster(t *testing.T) {
	ctx := testCtx(t)
	c := newClusterClient(t, ModeDirect)
	if err := c.CheckCluster(ctx); err != nil {
		t.Fatalf("CRDs installed, no router: %v", err)
	}

	// A router that is up passes; one that is down is a warning with a hint
	// (check_test.go has the fatal/warning table).
	r := sdktest.NewRouter(t)
	up := newClusterClient(t, ModeRouter, func(o *Options) { o.RouterURL = r.URL })
	if err := up.CheckCluster(ctx); err != nil {
		t.Errorf("router up: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	downURL := "http://" + ln.Addr().String()
	ln.Close()
	down := newClusterClient(t, ModeRouter, func(o *Options) { o.RouterURL = downURL })
	err = down.CheckCluster(ctx, RequireTemplate("python"))
	var ce *CheckError
	if !errors.As(err, &ce) || len(ce.Problems) != 1 || len(ce.Warnings) != 1 {
		t.Fatalf("err = %v, want a template problem and a router warning", err)
	}
	msg := err.Error()
	for _, want := range []string{"router at " + downURL + " is not reachable", "deploy the sandbox-router", `SandboxTemplate ` + down.Namespace() + `/python does not exist`} {
		if !strings.Contains(msg, want) {
			t.Errorf("message lacks %q:\n%s", want, msg)
		}
	}
	if err := env.Client.Create(ctx, testwrap.MakeTemplate(c.Namespace(), "python").Image("python").Obj()); err != nil {
		t.Fatal(err)
	}
	if err := c.CheckCluster(ctx, RequireTemplate("python")); err != nil {
		t.Errorf("template exists: %v", err)
	}
}

// TestClaimToRun is the whole path: claim, (stand-in) controller, run a
// command through each HTTP mode on a real sandboxd.
func TestClaimToRun(t *testing.T) {
	for _, mode := range httpModes {
		t.Run(string(mode), func(t *testing.T) {
			ctx := testCtx(t)
			d := sdktest.NewSandboxd(t)
			var routerURL string
			if mode == ModeRouter {
				routerURL = sdktest.NewRouter(t).URL
			}
			c := newClusterClient(t, mode, func(o *Options) { o.SandboxPort, o.RouterURL = d.Port, routerURL })
			sdktest.StartController(t, c.KubeClient(), c.Namespace())
			sb, err := c.Create(ctx, "py", WithName("e2e"))
			if err != nil {
				t.Fatal(err)
			}
			defer sb.Close()
			if err := sb.Files().Write(ctx, "hello.txt", []byte("hi from the sdk"), 0); err != nil {
				t.Fatal(err)
			}
			res, err := sb.Run(ctx, Shell("cat hello.txt"))
			if err != nil || res.Stdout != "hi from the sdk" {
				t.Fatalf("Run = %+v, %v", res, err)
			}
			if err := sb.Delete(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestKubeModesWithoutPod: port-forward and exec go through the API
// server to the pod; with no pod (no kubelet here) they must fail promptly
// with the API server's answer rather than hang.
func TestKubeModesWithoutPod(t *testing.T) {
	for _, mode := range []Mode{ModePortForward, ModeExec} {
		t.Run(string(mode), func(t *testing.T) {
			ctx := testCtx(t)
			c := newClusterClient(t, mode, func(o *Options) { o.Container = "sandbox" })
			cl := testwrap.MakeClaim(c.Namespace(), "nopod").Template("tmpl").ReadyWith("nopod", "10.0.0.1").Obj()
			sb, err := c.HandleFor(cl)
			if err != nil {
				t.Fatal(err)
			}
			defer sb.Close()
			_, err = sb.Run(ctx, Shell("true"))
			if err == nil || !strings.Contains(err.Error(), "nopod") {
				t.Fatalf("err = %v, want an error naming the pod", err)
			}
		})
	}
}
