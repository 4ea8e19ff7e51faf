package routertoken

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/scopedtoken"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap/fakeapi"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	testNS      = "team-a"
	testClaim   = "c"
	testSandbox = "c-sb"
	testUID     = types.UID("0b7e5f5e-uid-1")
)

var testSecret = []byte(strings.Repeat("k", scopedtoken.MinSecretLen))

var testSigner = func() *scopedtoken.Signer {
	s, err := scopedtoken.NewSigner(testSecret)
	if err != nil {
		panic(err) // a constant secret of the minimum length
	}
	return s
}()

// epoch is the fake clock's start, on a whole second as token expiries are.
var epoch = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

type rig struct {
	t     *testing.T
	r     *Reconciler
	c     client.Client
	clock *clocktesting.FakeClock
}

func newRig(t *testing.T, objs ...client.Object) *rig {
	t.Helper()
	return newRigWith(t, interceptor.Funcs{}, objs...)
}

// newRigWith is newRig with the client's calls going through funcs (to make some fail).
func newRigWith(t *testing.T, funcs interceptor.Funcs, objs ...client.Object) *rig {
	t.Helper()
	c := interceptor.NewClient(fakeapi.New(t, fakeapi.WithObjects(objs...), fakeapi.WithStatusSubresource(&extv1beta1.SandboxClaim{})).API, funcs)
	clk := clocktesting.NewFakeClock(epoch)
	return &rig{t: t, c: c, clock: clk, r: New(c, c, testSigner, Options{Clock: clk})}
}

// claim asks for a token and names testSandbox; shutdown is its shutdownTime (zero: none).
// shutdownIn is the shutdownTime d after the epoch; none for 0.
func shutdownIn(d time.Duration) time.Time {
	if d == 0 {
		return time.Time{}
	}
	return epoch.Add(d)
}

func claim(shutdown time.Time) *extv1beta1.SandboxClaim {
	w := testwrap.MakeClaim(testNS, testClaim).Template("tmpl").
		Annotation(extv1beta1.RouterTokenAnnotation, "true").SandboxStatus(testSandbox)
	if !shutdown.IsZero() {
		w = w.ShutdownTime(shutdown)
	}
	return w.Hub()
}

func sandboxObj(uid types.UID) *agentsv1beta1.Sandbox {
	sb := testwrap.MakeSandbox(testNS, testSandbox).Hub()
	sb.UID = uid
	return sb
}

func (g *rig) reconcile() ctrl.Result {
	g.t.Helper()
	res, err := g.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: testNS, Name: testClaim}})
	if err != nil {
		g.t.Fatalf("Reconcile: %v", err)
	}
	return res
}

// secret returns the token Secret, or nil when there is none.
func (g *rig) secret() *corev1.Secret {
	g.t.Helper()
	s := &corev1.Secret{}
	err := g.c.Get(context.Background(), types.NamespacedName{Namespace: testNS, Name: SecretName(testClaim)}, s)
	if err != nil {
		if client.IgnoreNotFound(err) == nil {
			return nil
		}
		g.t.Fatal(err)
	}
	return s
}

// The renewal is due when a third of the token's own lifetime is left, from its issue to its
// expiry, which the claim's shutdownTime may bring closer than the validity. Measuring the third
// against the full validity put the renewal of a token capped under 16 h before its issue, and
// the controller rewrote the Secret every second.
func TestRenewalWaitsForAThirdOfTheTokensOwnLifetime(t *testing.T) {
	tests := []struct {
		name     string
		shutdown time.Duration // from epoch; 0: no shutdownTime
		// wantRequeue is the wait after the first mint: until a third of the lifetime is left.
		wantRequeue time.Duration
	}{
		{"no shutdownTime: 24 h token, renewed after 16 h", 0, 16 * time.Hour},
		{"shutdown in 30 h: the validity is the cap", 30 * time.Hour, 16 * time.Hour},
		{"shutdown in 2 h: 2 h token, renewed after 80 min", 2 * time.Hour, 80 * time.Minute},
		{"shutdown in 6 min: renewed after 4 min", 6 * time.Minute, 4 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newRig(t, claim(shutdownIn(tt.shutdown)), sandboxObj(testUID))
			if got := g.reconcile().RequeueAfter; got != tt.wantRequeue {
				t.Fatalf("after minting, requeue in %v, want %v (when a third of the token's lifetime is left)", got, tt.wantRequeue)
			}
			first := g.secret()
			if first == nil {
				t.Fatal("no token Secret was written")
			}
			g.clock.Step(time.Second)
			if got := g.reconcile().RequeueAfter; got != tt.wantRequeue-time.Second {
				t.Errorf("a second later, requeue in %v, want %v", got, tt.wantRequeue-time.Second)
			}
			if again := g.secret(); again.ResourceVersion != first.ResourceVersion {
				t.Errorf("the Secret was rewritten a second after it was minted (resourceVersion %s -> %s), want it left alone until the renewal",
					first.ResourceVersion, again.ResourceVersion)
			}
		})
	}
}

// tokenIn returns the claims of the Secret's token, verified at the fake clock's time.
func (g *rig) tokenIn(s *corev1.Secret) scopedtoken.Claims {
	g.t.Helper()
	c, err := testSigner.Verify(string(s.Data[extv1beta1.RouterTokenKeyToken]), g.clock.Now())
	if err != nil {
		g.t.Fatalf("the Secret's token does not verify: %v", err)
	}
	return c
}

// setToken overwrites the Secret's token, as an older controller or another secret left it.
func (g *rig) setToken(tok string) {
	g.t.Helper()
	s := g.secret()
	s.Data[extv1beta1.RouterTokenKeyToken] = []byte(tok)
	if err := g.c.Update(context.Background(), s); err != nil {
		g.t.Fatal(err)
	}
}

// replaceSandbox deletes the Sandbox and makes a new one of the same name with uid.
func (g *rig) replaceSandbox(uid types.UID) {
	g.t.Helper()
	if err := g.c.Delete(context.Background(), sandboxObj(testUID)); err != nil {
		g.t.Fatal(err)
	}
	if err := g.c.Create(context.Background(), sandboxObj(uid)); err != nil {
		g.t.Fatal(err)
	}
}

func TestTokenBindsTheSandboxObject(t *testing.T) {
	oldSigner, _ := scopedtoken.NewSigner([]byte(strings.Repeat("o", scopedtoken.MinSecretLen)))
	tests := []struct {
		name string
		// change runs after the first mint (nil: nothing changes) and before the next reconcile.
		change      func(g *rig)
		wantRewrite bool
		wantUID     types.UID
	}{
		{"nothing changed: the token stays", nil, false, testUID},
		{"the Sandbox was replaced by one of the same name: a token for the new UID", func(g *rig) { g.replaceSandbox("uid-2") }, true, "uid-2"},
		{"a token minted before UIDs were bound is replaced", func(g *rig) {
			// Signed with the current secret, so only the missing UID condemns it.
			g.setToken(mustMint(t, testSecret, `{"ns":"team-a","name":"c-sb","exp":1999999999}`))
		}, true, testUID},
		{"a token signed with a rotated-out secret is replaced", func(g *rig) {
			tok, err := oldSigner.Mint(scopedtoken.Claims{Namespace: testNS, Name: testSandbox, UID: string(testUID), Expires: epoch.Add(time.Hour).Unix()})
			if err != nil {
				t.Fatal(err)
			}
			g.setToken(tok)
		}, true, testUID},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newRig(t, claim(time.Time{}), sandboxObj(testUID))
			g.reconcile()
			first := g.secret()
			if c := g.tokenIn(first); c.UID != string(testUID) || c.IssuedAt != epoch.Unix() || c.Namespace != testNS || c.Name != testSandbox {
				t.Fatalf("first token grants %+v, want %s/%s uid %s issued at %d", c, testNS, testSandbox, testUID, epoch.Unix())
			}
			if tt.change != nil {
				tt.change(g)
			}
			before := g.secret().ResourceVersion
			g.clock.Step(time.Minute)
			g.reconcile()
			after := g.secret()
			if rewritten := after.ResourceVersion != before; rewritten != tt.wantRewrite {
				t.Fatalf("Secret rewritten = %v, want %v", rewritten, tt.wantRewrite)
			}
			if c := g.tokenIn(after); c.UID != string(tt.wantUID) {
				t.Errorf("token binds uid %q, want %q", c.UID, tt.wantUID)
			}
		})
	}
}

// mustMint signs an arbitrary payload in the documented wire form (prefix, base64url JSON,
// base64url HMAC-SHA256 of both with the secret), for tokens Mint itself no longer makes.
func mustMint(t *testing.T, secret []byte, payload string) string {
	t.Helper()
	body := scopedtoken.Prefix + base64.RawURLEncoding.EncodeToString([]byte(payload))
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(body))
	return body + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// The claim's status can name its Sandbox before the manager's cache holds it; the token needs
// its UID, so the claim is looked at again shortly instead of minting an unbound token.
func TestWaitsForTheSandboxToReachTheCache(t *testing.T) {
	g := newRig(t, claim(time.Time{}))
	if got := g.reconcile().RequeueAfter; got != sandboxLag {
		t.Fatalf("Sandbox not cached: requeue in %v, want %v", got, sandboxLag)
	}
	if s := g.secret(); s != nil {
		t.Fatalf("a token Secret was written before the Sandbox's UID was known: %v", s.Data)
	}
	if err := g.c.Create(context.Background(), sandboxObj(testUID)); err != nil {
		t.Fatal(err)
	}
	g.reconcile()
	if s := g.secret(); s == nil || g.tokenIn(s).UID != string(testUID) {
		t.Fatalf("once the Sandbox is cached, want a token bound to uid %s; Secret %v", testUID, s)
	}
}

// A claim whose Sandbox was deleted says so, and is not polled for a Sandbox that will not come.
func TestStopsWaitingForADeletedSandbox(t *testing.T) {
	missing := claim(time.Time{})
	missing.Status.Conditions = []metav1.Condition{{Type: extv1beta1.ClaimConditionReady, Status: metav1.ConditionFalse,
		Reason: extv1beta1.ReasonSandboxMissing, LastTransitionTime: metav1.NewTime(epoch)}}
	g := newRig(t, missing)
	if got := g.reconcile().RequeueAfter; got != 0 {
		t.Fatalf("requeue in %v, want none: the claim reports its Sandbox deleted", got)
	}
	if s := g.secret(); s != nil {
		t.Fatalf("a token Secret was written for a deleted Sandbox: %v", s.Data)
	}
}

func TestRenewalAtItsTime(t *testing.T) {
	tests := []struct {
		name        string
		shutdown    time.Duration // from epoch; 0: none
		due         time.Duration // from epoch: when a third of the first token's lifetime is left
		wantRewrite bool
		wantExpires time.Duration // from epoch
		wantRequeue time.Duration
	}{
		{"uncapped: a fresh 24 h token", 0, 16 * time.Hour, true, 40 * time.Hour, 16 * time.Hour},
		{"capped by a shutdownTime beyond the validity: a token up to the shutdownTime", 36 * time.Hour, 16 * time.Hour, true, 36 * time.Hour, 13*time.Hour + 20*time.Minute},
		{"capped at the shutdownTime already: nothing to gain, left alone", 2 * time.Hour, 80 * time.Minute, false, 2 * time.Hour, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newRig(t, claim(shutdownIn(tt.shutdown)), sandboxObj(testUID))
			g.reconcile()
			before := g.secret().ResourceVersion
			g.clock.SetTime(epoch.Add(tt.due))
			res := g.reconcile()
			after := g.secret()
			if rewritten := after.ResourceVersion != before; rewritten != tt.wantRewrite {
				t.Fatalf("Secret rewritten = %v, want %v", rewritten, tt.wantRewrite)
			}
			if got, want := time.Unix(g.tokenIn(after).Expires, 0), epoch.Add(tt.wantExpires); !got.Equal(want) {
				t.Errorf("token expires %v, want %v", got, want)
			}
			if res.RequeueAfter != tt.wantRequeue {
				t.Errorf("requeue in %v, want %v", res.RequeueAfter, tt.wantRequeue)
			}
		})
	}
}

// The Secret says what the token opens and until when, and goes with its claim.
func TestSecretHoldsTheTokenAndWhatItOpens(t *testing.T) {
	g := newRig(t, claim(shutdownIn(2*time.Hour)), sandboxObj(testUID))
	g.reconcile()
	s := g.secret()
	if s == nil {
		t.Fatal("no token Secret was written")
	}
	want := map[string]string{
		extv1beta1.RouterTokenKeyNamespace: testNS,
		extv1beta1.RouterTokenKeySandbox:   testSandbox,
		extv1beta1.RouterTokenKeyExpires:   epoch.Add(2 * time.Hour).Format(time.RFC3339),
	}
	got := map[string]string{}
	for k := range want {
		got[k] = string(s.Data[k])
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Secret data (-want +got):\n%s", d)
	}
	if s.Labels[extv1beta1.RouterTokenSecretLabel] != "true" || s.Type != corev1.SecretTypeOpaque {
		t.Errorf("Secret labels %v type %s, want the router-token label and Opaque", s.Labels, s.Type)
	}
	if ref := metav1.GetControllerOf(s); ref == nil || ref.Kind != "SandboxClaim" || ref.Name != testClaim {
		t.Errorf("Secret controller %v, want claim %s (the Secret goes with it)", ref, testClaim)
	}
	if c := g.tokenIn(s); !time.Unix(c.Expires, 0).Equal(epoch.Add(2 * time.Hour)) {
		t.Errorf("token expires %v, want the claim's shutdownTime %v", time.Unix(c.Expires, 0), epoch.Add(2*time.Hour))
	}
}

// withoutAnnotation is the claim no longer asking for a token.
func withoutAnnotation(c *extv1beta1.SandboxClaim) *extv1beta1.SandboxClaim {
	delete(c.Annotations, extv1beta1.RouterTokenAnnotation)
	return c
}

// foreignSecret is a Secret of the token's name that someone else made.
func foreignSecret() *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: SecretName(testClaim)},
		Data: map[string][]byte{"token": []byte("theirs")}}
}

func TestWhenThereIsNoToken(t *testing.T) {
	asking := func() *testwrap.ClaimWrapper {
		return testwrap.MakeClaim(testNS, testClaim).Template("tmpl").Annotation(extv1beta1.RouterTokenAnnotation, "true").SandboxStatus(testSandbox)
	}
	cases := []struct {
		name string
		// minted: the claim asked, with its status naming the Sandbox, and got a token; then it
		// became claim (and was deleted, when deleting) before the reconcile under test.
		minted   bool
		deleting bool
		claim    *extv1beta1.SandboxClaim
		seed     *corev1.Secret // a Secret there from the start

		wantSecret string // "ours", "theirs", or "" for none
	}{
		{name: "the claim no longer asks: its Secret is deleted",
			minted: true, claim: withoutAnnotation(asking().Hub()), wantSecret: ""},
		{name: "the claim asks with another value than true: its Secret is deleted",
			minted: true, claim: asking().Annotation(extv1beta1.RouterTokenAnnotation, "yes").Hub(), wantSecret: ""},
		{name: "the claim is being deleted: the Secret is left to garbage collection",
			minted: true, deleting: true, claim: asking().Finalizers("test/hold").Hub(), wantSecret: "ours"},
		{name: "a Secret of the name someone else made is never overwritten",
			claim: asking().Hub(), seed: foreignSecret(), wantSecret: "theirs"},
		{name: "a Secret of the name someone else made is never deleted",
			claim: withoutAnnotation(asking().Hub()), seed: foreignSecret(), wantSecret: "theirs"},
		{name: "a claim not served yet gets none",
			claim: testwrap.MakeClaim(testNS, testClaim).Annotation(extv1beta1.RouterTokenAnnotation, "true").Hub(), wantSecret: ""},
		{name: "a claim at its end gets none",
			claim: asking().ShutdownTime(epoch).Hub(), wantSecret: ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			objs := []client.Object{sandboxObj(testUID)}
			if tc.seed != nil {
				objs = append(objs, tc.seed)
			}
			first := tc.claim
			if tc.minted {
				first = asking().Finalizers(tc.claim.Finalizers...).Hub()
			}
			g := newRig(t, append(objs, first)...)
			if tc.minted {
				g.reconcile()
				if g.secret() == nil {
					t.Fatal("no token was minted while the claim asked")
				}
				g.changeClaim(tc.claim.Annotations, tc.deleting)
			}
			if res := g.reconcile(); res.RequeueAfter != 0 {
				t.Errorf("requeue after %v, want none", res.RequeueAfter)
			}
			s := g.secret()
			got := ""
			switch {
			case s == nil:
			case metav1.GetControllerOf(s) != nil:
				got = "ours"
			case string(s.Data["token"]) == "theirs":
				got = "theirs"
			default:
				got = "someone else's, changed"
			}
			if got != tc.wantSecret {
				t.Errorf("Secret is %q, want %q", got, tc.wantSecret)
			}
		})
	}
}

// changeClaim gives the claim new annotations, and deletes it when deleting (a finalizer holds
// it).
func (g *rig) changeClaim(annotations map[string]string, deleting bool) {
	g.t.Helper()
	ctx := context.Background()
	c := &extv1beta1.SandboxClaim{}
	if err := g.c.Get(ctx, types.NamespacedName{Namespace: testNS, Name: testClaim}, c); err != nil {
		g.t.Fatal(err)
	}
	c.Annotations = annotations
	if err := g.c.Update(ctx, c); err != nil {
		g.t.Fatal(err)
	}
	if deleting {
		if err := g.c.Delete(ctx, c); err != nil {
			g.t.Fatal(err)
		}
	}
}

// A Secret deleted by hand is minted again on the claim's next reconcile.
func TestDeletedSecretIsMintedAgain(t *testing.T) {
	g := newRig(t, claim(time.Time{}), sandboxObj(testUID))
	g.reconcile()
	if err := g.c.Delete(context.Background(), g.secret()); err != nil {
		t.Fatal(err)
	}
	g.clock.Step(time.Minute)
	if got := g.reconcile().RequeueAfter; got != 16*time.Hour {
		t.Errorf("requeue after %v, want the new token's renewal in 16h", got)
	}
	if s := g.secret(); s == nil || g.tokenIn(s).IssuedAt != epoch.Add(time.Minute).Unix() {
		t.Fatalf("Secret %v, want a token issued now", s)
	}
}

// A token capped at the claim's shutdownTime is renewed past it once the claim's owner moves the
// shutdownTime later.
func TestALaterShutdownTimeRenewsACappedToken(t *testing.T) {
	g := newRig(t, claim(shutdownIn(2*time.Hour)), sandboxObj(testUID))
	g.reconcile()
	g.clock.SetTime(epoch.Add(90 * time.Minute)) // past the renewal of the 2 h token
	if res := g.reconcile(); res.RequeueAfter != 0 || !time.Unix(g.tokenIn(g.secret()).Expires, 0).Equal(epoch.Add(2*time.Hour)) {
		t.Fatalf("requeue %v, token until %v; want the capped token left alone", res.RequeueAfter, time.Unix(g.tokenIn(g.secret()).Expires, 0))
	}
	c := &extv1beta1.SandboxClaim{}
	if err := g.c.Get(context.Background(), types.NamespacedName{Namespace: testNS, Name: testClaim}, c); err != nil {
		t.Fatal(err)
	}
	c.Spec.Lifecycle.ShutdownTime = &metav1.Time{Time: epoch.Add(10 * time.Hour)}
	if err := g.c.Update(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	g.reconcile()
	if got := time.Unix(g.tokenIn(g.secret()).Expires, 0); !got.Equal(epoch.Add(10 * time.Hour)) {
		t.Errorf("token expires %v, want the new shutdownTime %v", got, epoch.Add(10*time.Hour))
	}
}

// Reading or writing the Secret can fail; the reconcile returns the error so it is retried,
// and nothing is half-written.
func TestAPIErrorsAreRetried(t *testing.T) {
	secrets := schema.GroupResource{Resource: "secrets"}
	isSecret := func(o client.Object) bool { _, ok := o.(*corev1.Secret); return ok }
	cases := []struct {
		name     string
		existing bool // a token Secret is there (due for renewal) before the failing reconcile
		funcs    interceptor.Funcs
		want     func(error) bool
	}{
		{name: "reading the Secret fails",
			funcs: interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if isSecret(obj) {
					return apierrors.NewServiceUnavailable("apiserver restarting")
				}
				return c.Get(ctx, key, obj, opts...)
			}},
			want: apierrors.IsServiceUnavailable},
		{name: "creating the Secret fails",
			funcs: interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				return apierrors.NewInternalError(errors.New("etcd timeout"))
			}},
			want: apierrors.IsInternalError},
		{name: "the Secret changed since it was read: the renewal conflicts", existing: true,
			funcs: interceptor.Funcs{Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
				if isSecret(obj) {
					return apierrors.NewConflict(secrets, obj.GetName(), errors.New("the object has been modified"))
				}
				return c.Update(ctx, obj, opts...)
			}},
			want: apierrors.IsConflict},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			objs := []client.Object{claim(time.Time{}), sandboxObj(testUID)}
			if tc.existing {
				setup := newRig(t, objs...)
				setup.reconcile()
				objs = append(objs, setup.secret())
			}
			g := newRigWith(t, tc.funcs, objs...)
			g.clock.Step(17 * time.Hour) // the existing token is due
			res, err := g.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: testNS, Name: testClaim}})
			if !tc.want(err) {
				t.Fatalf("Reconcile = %+v, %v; want the API error, to be retried", res, err)
			}
		})
	}
}
