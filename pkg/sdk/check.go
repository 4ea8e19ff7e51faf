package sdk

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
)

// CheckOption adds checks to CheckCluster.
type CheckOption func(*checkConfig)

type checkConfig struct{ templates []string }

// RequireTemplate makes CheckCluster also verify that the SandboxTemplate
// exists in the client's namespace.
func RequireTemplate(name string) CheckOption {
	return func(c *checkConfig) { c.templates = append(c.templates, name) }
}

// CheckError lists everything CheckCluster found wrong, each with how to fix
// it, in two kinds (the agent-session flow's startup validation): Problems make
// agent-sandbox unusable (a CRD not served, a required template missing) and
// are fatal; Warnings do not stop sandboxes from being created and used (the
// router did not answer /healthz: the router modes fail, the others work).
// Use Fatal, or IsFatal on the error, to tell them apart.
type CheckError struct {
	Problems []string
	Warnings []string
}

// Fatal reports whether agent-sandbox is unusable (any Problem).
func (e *CheckError) Fatal() bool { return len(e.Problems) > 0 }

func (e *CheckError) Error() string {
	var b strings.Builder
	if e.Fatal() {
		b.WriteString("agent-sandbox is not usable:")
		writeList(&b, e.Problems)
		if len(e.Warnings) > 0 {
			b.WriteString("\nwarnings:")
			writeList(&b, e.Warnings)
		}
		return b.String()
	}
	b.WriteString("agent-sandbox is usable, with warnings:")
	writeList(&b, e.Warnings)
	return b.String()
}

func writeList(b *strings.Builder, items []string) {
	if len(items) == 1 {
		b.WriteString(" " + items[0])
		return
	}
	for _, it := range items {
		b.WriteString("\n  - " + it)
	}
}

// IsFatal reports whether err, from CheckCluster, means agent-sandbox cannot
// be used: any error except a CheckError that carries only warnings.
func IsFatal(err error) bool {
	var ce *CheckError
	if errors.As(err, &ce) {
		return ce.Fatal()
	}
	return err != nil
}

// requiredResources are the CRDs the SDK needs, by group/version.
var requiredResources = []struct {
	gv        string
	resources []string
}{
	{agentsv1alpha1.GroupVersion.String(), []string{"sandboxes"}},
	{extv1alpha1.GroupVersion.String(), []string{"sandboxclaims", "sandboxtemplates", "sandboxwarmpools"}},
}

const installCRDsHint = "install the CRDs: `kubectl apply -f config/crd/bases` from the agent-sandbox repository (or the charts/agent-sandbox Helm chart), then run the agent-sandbox-controller"

// CheckCluster validates the installation at startup (the agent-session flow's startup
// validation): the four CRDs are served (sandboxes.agents.x-k8s.io,
// sandboxclaims/sandboxtemplates/sandboxwarmpools.extensions.agents.x-k8s.io,
// all v1alpha1) and the RequireTemplate templates exist — fatal problems —
// and, when a RouterURL is set, the router answers GET /healthz with 200 — a
// warning. It returns nil when all is well, else a *CheckError listing each
// problem and warning with how to fix it; IsFatal(err) tells whether to stop:
//
//	if err := c.CheckCluster(ctx); sdk.IsFatal(err) {
//		return err // CRDs missing
//	} else if err != nil {
//		log.Print(err) // the router is not reachable
//	}
func (c *Client) CheckCluster(ctx context.Context, opts ...CheckOption) error {
	var cc checkConfig
	for _, o := range opts {
		o(&cc)
	}
	var problems, warnings []string
	disco := c.core.Discovery()
	crdsOK := true
	for _, want := range requiredResources {
		list, err := disco.ServerResourcesForGroupVersion(want.gv)
		if err != nil {
			crdsOK = false
			if apierrors.IsNotFound(err) {
				names := make([]string, len(want.resources))
				for i, r := range want.resources {
					names[i] = r + "." + strings.Split(want.gv, "/")[0]
				}
				problems = append(problems, fmt.Sprintf("API group %s is not served: CRDs %s are not installed; %s",
					want.gv, strings.Join(names, ", "), installCRDsHint))
				continue
			}
			problems = append(problems, fmt.Sprintf("cannot query the API server for %s: %v", want.gv, err))
			continue
		}
		var have []string
		for _, r := range list.APIResources {
			have = append(have, r.Name)
		}
		for _, r := range want.resources {
			if !slices.Contains(have, r) {
				crdsOK = false
				problems = append(problems, fmt.Sprintf("CRD %s.%s (%s) is not installed; %s",
					r, strings.Split(want.gv, "/")[0], want.gv, installCRDsHint))
			}
		}
	}
	if crdsOK {
		for _, name := range cc.templates {
			err := c.kube.Get(ctx, client.ObjectKey{Namespace: c.ns, Name: name}, &extv1alpha1.SandboxTemplate{})
			switch {
			case apierrors.IsNotFound(err):
				problems = append(problems, fmt.Sprintf("SandboxTemplate %s/%s does not exist; create it (kubectl apply -f a SandboxTemplate manifest)", c.ns, name))
			case err != nil:
				problems = append(problems, fmt.Sprintf("cannot read SandboxTemplate %s/%s: %v", c.ns, name, err))
			}
		}
	}
	if c.opts.RouterURL != "" {
		if err := c.checkRouter(ctx); err != nil {
			warnings = append(warnings, err.Error())
		}
	}
	if len(problems) > 0 || len(warnings) > 0 {
		return &CheckError{Problems: problems, Warnings: warnings}
	}
	return nil
}

func (c *Client) checkRouter(ctx context.Context) error {
	const hint = "deploy the sandbox-router (cmd/router) and check the router URL (Options.RouterURL, --router)"
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	u := c.opts.RouterURL + "/healthz"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return fmt.Errorf("router URL %q: %v", c.opts.RouterURL, err)
	}
	if c.opts.RouterToken != "" {
		req.Header.Set("Authorization", "Bearer "+c.opts.RouterToken)
	}
	resp, err := c.http.api.Do(req)
	if err != nil {
		var why string
		switch {
		case errors.Is(err, context.DeadlineExceeded):
			why = "no answer within 5s"
		default:
			why = err.Error()
		}
		return fmt.Errorf("router at %s is not reachable (%s); %s", c.opts.RouterURL, why, hint)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("router health check GET %s answered %d, want 200; %s", u, resp.StatusCode, hint)
	}
	return nil
}
