package integration

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
	"github.com/agent-sandbox/agent-sandbox/pkg/sdk"
)

// taskWorkerRules are the task controller's documented worker rights (docs/integrations.md), exactly: claims may be created,
// deleted and patched but not read.
var taskWorkerRules = []rbacv1.PolicyRule{
	{APIGroups: []string{"extensions.agents.x-k8s.io"}, Resources: []string{"sandboxclaims"}, Verbs: []string{"create", "delete", "patch"}},
	{APIGroups: []string{"extensions.agents.x-k8s.io"}, Resources: []string{"sandboxtemplates", "sandboxwarmpools"}, Verbs: []string{"get", "list", "watch"}},
	{APIGroups: []string{"agents.x-k8s.io"}, Resources: []string{"sandboxes"}, Verbs: []string{"get", "list", "watch"}},
	{APIGroups: []string{""}, Resources: []string{"pods/portforward"}, Verbs: []string{"create"}},
	{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"get", "list", "watch"}},
}

// narrowSDK returns an SDK client of ns acting as a ServiceAccount bound to taskWorkerRules,
// once RBAC grants them (and still refuses reading claims).
func narrowSDK(t *testing.T, ns string) *sdk.Client {
	t.Helper()
	mustCreateObj(t, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "task-worker"}, Rules: taskWorkerRules})
	bindRoles(t, ns, "task-worker", "Role/task-worker")
	as := actAs(t, ns, "task-worker")
	testwrap.Eventually(t, "RBAC grants the worker's rules", func() error {
		return as.List(context.Background(), &extv1alpha1.SandboxTemplateList{}, client.InNamespace(ns))
	})
	if err := as.List(context.Background(), &extv1alpha1.SandboxClaimList{}, client.InNamespace(ns)); !apierrors.IsForbidden(err) {
		t.Fatalf("the worker lists claims: %v; want Forbidden (the test needs the worker's narrow rights)", err)
	}
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + ns + ":task-worker",
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
	}
	cli, err := sdk.New(sdk.Options{RESTConfig: cfg, Namespace: ns, Mode: sdk.ModeDirect, ReadyTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cli.Close)
	return cli
}

type sdkResult struct {
	sb  *sdk.Sandbox
	err error
}

// getOrCreateAsync runs GetOrCreate in the background: the test plays the kubelet meanwhile.
func getOrCreateAsync(cli *sdk.Client, name, template string, opts ...sdk.CreateOption) <-chan sdkResult {
	ch := make(chan sdkResult, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		sb, err := cli.GetOrCreate(ctx, name, template, opts...)
		ch <- sdkResult{sb, err}
	}()
	return ch
}

// runPodUnlessDone plays the kubelet for the pod once it exists and returns the SDK call's
// result; an SDK call that ends before the pod appears fails the test with its error.
func runPodUnlessDone(t *testing.T, ns, pod, ip string, res <-chan sdkResult) sdkResult {
	t.Helper()
	var early *sdkResult
	testwrap.Eventually(t, "pod "+pod+" exists", func() error {
		if len(res) > 0 {
			r := <-res
			early = &r
			return nil
		}
		return exists(podOf(ns, pod), true)()
	})
	if early != nil {
		t.Fatalf("GetOrCreate ended before the pod existed: %v", errString(early.err))
	}
	setPodStatus(t, podOf(ns, pod), running(ip))
	return <-res
}

// The task worker (claims: create/delete/patch only) claims, reattaches to and deletes a
// workspace with the SDK: readiness is followed on the claim's Sandbox, the claim is read
// through an empty patch.
func TestSDKClaimLifecycleUnderTheTaskWorkerRights(t *testing.T) {
	ns := newNamespace(t)
	mustCreateObj(t, testwrap.MakeTemplate(ns, "coding-agent").Obj())
	cli := narrowSDK(t, ns)
	ctx := context.Background()

	res := getOrCreateAsync(cli, "session-1", "coding-agent")
	r := runPodUnlessDone(t, ns, "session-1", "10.0.0.21", res)
	if r.err != nil {
		t.Fatalf("GetOrCreate under the worker's rights: %v", r.err)
	}
	if r.sb.SandboxName() != "session-1" || r.sb.PodIP() != "10.0.0.21" || !r.sb.Status().Ready {
		t.Fatalf("handle: sandbox %q, pod IP %q, status %+v; want session-1, 10.0.0.21, ready", r.sb.SandboxName(), r.sb.PodIP(), r.sb.Status())
	}

	for _, tc := range []struct {
		name string
		do   func() error
	}{
		{"GetOrCreate reattaches to the existing claim by name", func() error {
			sb, err := cli.GetOrCreate(ctx, "session-1", "coding-agent")
			if err == nil && (sb.SandboxName() != "session-1" || sb.PodIP() != "10.0.0.21") {
				return errors.New("reattached to sandbox " + sb.SandboxName() + " at " + sb.PodIP())
			}
			return err
		}},
		{"GetOrCreate refuses a claim of another template", func() error {
			_, err := cli.GetOrCreate(ctx, "session-1", "other")
			if errors.Is(err, sdk.ErrTemplateMismatch) {
				return nil
			}
			return errors.New("want ErrTemplateMismatch, got " + errString(err))
		}},
		{"Get reads the claim", func() error {
			sb, err := cli.Get(ctx, "session-1")
			if err == nil && sb.Template() != "coding-agent" {
				return errors.New("template " + sb.Template())
			}
			return err
		}},
		{"Refresh keeps the handle ready", func() error {
			if err := r.sb.Refresh(ctx); err != nil {
				return err
			}
			if st := r.sb.Status(); !st.Ready || r.sb.PodIP() != "10.0.0.21" {
				return errors.New("not ready after Refresh: " + st.Reason + ": " + st.Message)
			}
			return nil
		}},
		{"Delete with Wait returns once the claim is gone", func() error {
			if err := r.sb.Delete(ctx, sdk.DeleteOption{Wait: true}); err != nil {
				return err
			}
			return exists(testwrap.MakeClaim(ns, "session-1").Obj(), false)()
		}},
		{"Get of the deleted claim is ErrNotFound", func() error {
			if _, err := cli.Get(ctx, "session-1"); !errors.Is(err, sdk.ErrNotFound) {
				return errors.New("want ErrNotFound, got " + errString(err))
			}
			return nil
		}},
	} {
		if err := tc.do(); err != nil { // in order: each step builds on the previous
			t.Fatalf("%s: %v", tc.name, err)
		}
	}
}

// A claim adopted from a warm pool gets a Sandbox of another name: the narrow-rights wait finds
// it by the claim-uid label.
func TestSDKAdoptsFromAWarmPoolUnderTheTaskWorkerRights(t *testing.T) {
	ns := newNamespace(t)
	mustCreateObj(t, testwrap.MakeTemplate(ns, "coding-agent").Obj(),
		testwrap.MakeWarmPool(ns, "pool").Template("coding-agent").Replicas(1).Obj())
	var member string
	testwrap.Eventually(t, "the pool has a member", func() error {
		sbs := sandboxesIn(t, ns)
		if len(sbs) != 1 {
			return errors.New("no single pool member yet")
		}
		member = sbs[0].Name
		return nil
	})
	setPodStatus(t, waitForPod(t, ns, member), running("10.0.0.31"))
	testwrap.Eventually(t, "the member is ready", readyIs(t, ns, member, metav1.ConditionTrue, "DependenciesReady"))
	cli := narrowSDK(t, ns)

	r := <-getOrCreateAsync(cli, "warm-1", "coding-agent", sdk.WithWarmPool("default"))
	if r.err != nil {
		t.Fatalf("GetOrCreate from the pool: %v", r.err)
	}
	if r.sb.SandboxName() != member || r.sb.PodIP() != "10.0.0.31" {
		t.Fatalf("adopted sandbox %q at %q, want the pool member %s at 10.0.0.31", r.sb.SandboxName(), r.sb.PodIP(), member)
	}
}

// What a narrow-rights caller loses: the claim's conditions. A claim the controller cannot
// serve times out for both; a caller that reads claims gets the controller's reason, a narrow
// one a message naming the missing right. Either way the claim is deleted again.
func TestSDKMissingTemplateTimeoutWithAndWithoutClaimReadRights(t *testing.T) {
	for _, tc := range []struct {
		name              string
		client            func(t *testing.T, ns string) *sdk.Client
		reason, inMessage string
	}{
		{name: "reads claims", client: adminSDK, reason: extv1alpha1.ReasonTemplateNotFound},
		{name: "worker rights", client: narrowSDK, reason: "Pending", inMessage: "reading sandboxclaims (get/watch) is forbidden"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := newNamespace(t)
			cli := tc.client(t, ns)
			_, err := cli.Create(context.Background(), "no-such-template", sdk.WithName("lost"), sdk.WithReadyTimeout(3*time.Second))
			var we *sdk.WaitError
			if !errors.Is(err, sdk.ErrTimeout) || !errors.As(err, &we) {
				t.Fatalf("Create of a claim without template = %v; want a *WaitError wrapping ErrTimeout", err)
			}
			if we.Reason != tc.reason || !strings.Contains(we.Message, tc.inMessage) {
				t.Fatalf("reason %q, message %q; want reason %q and a message containing %q", we.Reason, we.Message, tc.reason, tc.inMessage)
			}
			testwrap.Eventually(t, "the failed claim is deleted", exists(testwrap.MakeClaim(ns, "lost").Obj(), false))
		})
	}
}

// adminSDK is an SDK client of ns with the test's own (unrestricted) rights.
func adminSDK(t *testing.T, ns string) *sdk.Client {
	t.Helper()
	cli, err := sdk.New(sdk.Options{RESTConfig: env.Config, Namespace: ns, Mode: sdk.ModeDirect})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cli.Close)
	return cli
}

func errString(err error) string {
	if err == nil {
		return "nil"
	}
	return err.Error()
}
