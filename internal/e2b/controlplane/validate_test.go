package controlplane

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var now = time.Date(2026, 11, 28, 7, 0, 0, 0, time.UTC)

// codeOf is the status an error answers with (0 for none).
func codeOf(err error) int {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae.code
	}
	if err != nil {
		return 500
	}
	return 0
}

func TestCreateRequestsBecomeClaims(t *testing.T) {
	s := &server{clock: clocktesting.NewFakeClock(now)}
	tests := []struct {
		name     string
		req      newSandbox
		wantCode int
		wantMsg  string
		check    func(t *testing.T, c *extv1alpha1.SandboxClaim)
	}{
		{name: "the version's default timeout, env sorted, metadata kept",
			req: newSandbox{TemplateID: "py", EnvVars: map[string]string{"B": "2", "A": "1"}, Metadata: map[string]string{"run": "x"}},
			check: func(t *testing.T, c *extv1alpha1.SandboxClaim) {
				if got := c.Spec.Lifecycle.ShutdownTime.Time; !got.Equal(now.Add(300 * time.Second)) {
					t.Errorf("shutdownTime %s, want now + 300 s", got)
				}
				if c.Spec.Env[0].Name != "A" || c.Spec.Env[1].Name != "B" || c.Annotations[metadataAnnotation] != `{"run":"x"}` {
					t.Errorf("env %v, annotations %v", c.Spec.Env, c.Annotations)
				}
				if c.Labels[sandboxLabel] != "true" || c.Spec.TemplateRef.Name != "py" || c.Spec.Lifecycle.ShutdownPolicy != extv1alpha1.ShutdownPolicyDelete {
					t.Errorf("claim %+v, want the E2B label, template py and policy Delete", c)
				}
			}},
		{name: "a timeout of a day is the most", req: newSandbox{TemplateID: "py", Timeout: ptr.To[int64](86400)}},
		{name: "over a day", req: newSandbox{TemplateID: "py", Timeout: ptr.To[int64](86401)}, wantCode: 400, wantMsg: "timeout"},
		{name: "a negative timeout", req: newSandbox{TemplateID: "py", Timeout: ptr.To[int64](-1)}, wantCode: 400, wantMsg: "timeout"},
		{name: "no template", req: newSandbox{}, wantCode: 400, wantMsg: "templateID"},
		{name: "a template name with a slash", req: newSandbox{TemplateID: "a/b"}, wantCode: 400, wantMsg: "templateID"},
		{name: "autoPause", req: newSandbox{TemplateID: "py", AutoPause: ptr.To(true)}, wantCode: 400, wantMsg: "idle timeout"},
		{name: "autoPause off is fine", req: newSandbox{TemplateID: "py", AutoPause: ptr.To(false)}},
		{name: "autoResume", req: newSandbox{TemplateID: "py", AutoResume: []byte(`{"enabled":true}`)}, wantCode: 400, wantMsg: "wake-on-request"},
		{name: "no internet", req: newSandbox{TemplateID: "py", AllowInternetAccess: ptr.To(false)}, wantCode: 400, wantMsg: "egress"},
		{name: "volume mounts", req: newSandbox{TemplateID: "py", VolumeMounts: []byte(`[{"name":"v","path":"/d"}]`)}, wantCode: 400, wantMsg: "volumeClaimTemplates"},
		{name: "no volume mounts is fine", req: newSandbox{TemplateID: "py", VolumeMounts: []byte(`[]`)}},
		{name: "too many metadata keys", req: newSandbox{TemplateID: "py", Metadata: manyKeys(65)}, wantCode: 400, wantMsg: "at most 64"},
		{name: "metadata too big", req: newSandbox{TemplateID: "py", Metadata: map[string]string{"k": strings.Repeat("v", 17<<10)}}, wantCode: 400, wantMsg: "bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := s.claimFor(&tt.req, "team-a", 300)
			if code := codeOf(err); code != tt.wantCode || (err != nil && !strings.Contains(err.Error(), tt.wantMsg)) {
				t.Fatalf("claimFor = %v (%d), want %d containing %q", err, code, tt.wantCode, tt.wantMsg)
			}
			if tt.check != nil {
				tt.check(t, c)
			}
		})
	}
}

func manyKeys(n int) map[string]string {
	m := map[string]string{}
	for i := range n {
		m[strings.Repeat("k", i+1)] = "v"
	}
	return m
}

func TestListQueries(t *testing.T) {
	tests := []struct {
		name     string
		query    string
		wantCode int
		want     func(q listQuery) bool
	}{
		{name: "defaults", query: "", want: func(q listQuery) bool { return q.limit == 100 && q.offset == 0 && len(q.states) == 0 }},
		{name: "metadata as one encoded parameter", query: "metadata=" + url.QueryEscape("a=1&b=x y"),
			want: func(q listQuery) bool { return q.metadata["a"] == "1" && q.metadata["b"] == "x y" }},
		{name: "states as a comma list", query: "state=running,paused", want: func(q listQuery) bool { return len(q.states) == 2 }},
		{name: "an unknown state", query: "state=sleeping", wantCode: 400},
		{name: "limit and next token", query: "limit=5&nextToken=10", want: func(q listQuery) bool { return q.limit == 5 && q.offset == 10 }},
		{name: "limit over the most", query: "limit=1001", wantCode: 400},
		{name: "a token we never gave", query: "nextToken=abc", wantCode: 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, _ := url.ParseQuery(tt.query)
			q, err := parseListQuery(v)
			if code := codeOf(err); code != tt.wantCode {
				t.Fatalf("parseListQuery(%q) = %v, want code %d", tt.query, err, tt.wantCode)
			}
			if tt.want != nil && !tt.want(q) {
				t.Errorf("parseListQuery(%q) = %+v", tt.query, q)
			}
		})
	}
}

func TestDecodingBodies(t *testing.T) {
	tests := []struct {
		name     string
		body     string
		wantCode int
	}{
		{"an empty body is no body", "", 0},
		{"an object", `{"timeout": 5}`, 0},
		{"an unknown field", `{"timeout": 5, "x": 1}`, 400},
		{"two objects", `{"timeout": 5}{"timeout": 6}`, 400},
		{"a string where a number goes", `{"timeout": "5"}`, 400},
		{"over a MiB", `{"timeout": 5` + strings.Repeat(" ", maxBody) + `}`, 413},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b timeoutBody
			err := decode(httptest.NewRequest(http.MethodPost, "/", strings.NewReader(tt.body)), &b)
			if code := codeOf(err); code != tt.wantCode {
				t.Errorf("decode = %v, want code %d", err, tt.wantCode)
			}
		})
	}
}

func TestAClaimsReadyConditionDecidesTheWait(t *testing.T) {
	cond := func(status metav1.ConditionStatus, reason string) []metav1.Condition {
		return []metav1.Condition{{Type: extv1alpha1.ClaimConditionReady, Status: status, Reason: reason}}
	}
	tests := []struct {
		name      string
		conds     []metav1.Condition
		sandbox   string
		wantReady bool
		wantCode  int
	}{
		{name: "no status yet: wait"},
		{name: "ready and named", conds: cond(metav1.ConditionTrue, "Ready"), sandbox: "sb", wantReady: true},
		{name: "not ready yet: wait", conds: cond(metav1.ConditionFalse, extv1alpha1.ReasonSandboxNotReady)},
		{name: "no such template", conds: cond(metav1.ConditionFalse, extv1alpha1.ReasonTemplateNotFound), wantCode: 400},
		{name: "env refused", conds: cond(metav1.ConditionFalse, extv1alpha1.ReasonEnvVarsInjectionRejected), wantCode: 400},
		{name: "expired", conds: cond(metav1.ConditionFalse, extv1alpha1.ReasonClaimExpired), wantCode: 410},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &extv1alpha1.SandboxClaim{Status: extv1alpha1.SandboxClaimStatus{Conditions: tt.conds}}
			c.Status.SandboxStatus.Name = tt.sandbox
			ready, err := claimReady(c)
			if ready != tt.wantReady || codeOf(err) != tt.wantCode {
				t.Errorf("claimReady = %v, %v; want %v, code %d", ready, err, tt.wantReady, tt.wantCode)
			}
		})
	}
}

func TestResourcesAreWhatTheContainersRequest(t *testing.T) {
	sb := &agentsv1beta1.Sandbox{}
	sb.Spec.PodTemplate.Spec.Containers = []corev1.Container{
		{Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m"),
			corev1.ResourceMemory: resource.MustParse("512Mi")}}},
		{Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi"),
			corev1.ResourceEphemeralStorage: resource.MustParse("2Gi")}}},
	}
	if cpu, mem, disk := resources(sb); cpu != 2 || mem != 1536 || disk != 2048 {
		t.Errorf("resources = %d cores, %d MiB, %d MiB disk; want 2, 1536, 2048", cpu, mem, disk)
	}
}
