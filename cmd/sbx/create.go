package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
	"github.com/agent-sandbox/agent-sandbox/pkg/sdk"
)

// createFlags are sbx create's flags.
type createFlags struct {
	template, image, name, warmPool, shutdownPolicy, egress string
	env, labels, podLabels, onCreate, egressCIDRs           []string
	egressDomains                                           []string
	ttl, timeout, idle                                      time.Duration
	noWait, keep, progress                                  bool
	out                                                     *outputFlags
}

// check refuses flag combinations before anything is contacted.
func (f *createFlags) check(args []string) error {
	switch {
	case f.template == "" && f.image == "":
		return fmt.Errorf("--template is required (a claim), or --image for a Sandbox without a claim")
	case f.template != "" && f.image != "":
		return fmt.Errorf("--template and --image exclude each other")
	case f.template != "" && len(args) > 0:
		return fmt.Errorf("a command after -- needs --image; a template's sandbox runs its own")
	case f.template != "" && (f.egress != "" || len(f.egressCIDRs) > 0 || len(f.egressDomains) > 0):
		return fmt.Errorf("--egress, --egress-cidr and --egress-domain need --image: a claim's sandbox follows its template's networkPolicy and domains")
	case f.image != "" && f.warmPool != "":
		return fmt.Errorf("--warmpool needs --template")
	case f.egress == "" && len(f.egressCIDRs) > 0:
		return fmt.Errorf("--egress-cidr needs --egress restricted")
	case f.egress != "restricted" && len(f.egressDomains) > 0:
		return fmt.Errorf("--egress-domain needs --egress restricted")
	}
	return nil
}

// options turns the flags into the SDK's create options.
func (f *createFlags) options() ([]sdk.CreateOption, error) {
	var opts []sdk.CreateOption
	if f.name != "" {
		opts = append(opts, sdk.WithName(f.name))
	}
	envMap, err := parsePairs(f.env, "--env")
	if err != nil {
		return nil, err
	}
	if len(envMap) > 0 && f.image == "" {
		opts = append(opts, sdk.WithEnv(envMap)) // with --image the container gets it
	}
	labelMap, err := parsePairs(f.labels, "--label")
	if err != nil {
		return nil, err
	}
	if len(labelMap) > 0 {
		opts = append(opts, sdk.WithLabels(labelMap))
	}
	podLabelMap, err := parsePairs(f.podLabels, "--pod-label")
	if err != nil {
		return nil, err
	}
	if len(podLabelMap) > 0 {
		opts = append(opts, sdk.WithPodLabels(podLabelMap))
	}
	if f.warmPool != "" {
		opts = append(opts, sdk.WithWarmPool(f.warmPool))
	}
	if f.egress != "" {
		e, err := sdk.ParseEgress(f.egress, f.egressCIDRs...)
		if err == nil && len(f.egressDomains) > 0 {
			e = sdk.EgressRestrictedTo(f.egressCIDRs, f.egressDomains, false)
			err = e.Validate()
		}
		if err != nil {
			return nil, fmt.Errorf("--egress: %w", err)
		}
		opts = append(opts, sdk.WithEgress(e))
	}
	if f.idle > 0 {
		opts = append(opts, sdk.WithIdleTimeout(f.idle))
	}
	if f.ttl > 0 {
		opts = append(opts, sdk.WithTTL(f.ttl))
	}
	if f.shutdownPolicy != "" {
		p, err := parseShutdownPolicy(f.shutdownPolicy)
		if err != nil {
			return nil, err
		}
		opts = append(opts, sdk.WithShutdownPolicy(p))
	}
	if f.timeout > 0 {
		opts = append(opts, sdk.WithReadyTimeout(f.timeout))
	}
	if f.noWait {
		opts = append(opts, sdk.NoWait())
	}
	if f.keep {
		opts = append(opts, sdk.KeepOnFailure())
	}
	for _, h := range f.onCreate {
		opts = append(opts, sdk.OnCreate(sdk.Shell(h)))
	}
	return opts, nil
}

// sandbox is the Sandbox --image asks for: one container "sandbox" running the image (its own
// entrypoint, or the command after --) with the --env variables.
func (f *createFlags) sandbox(command []string) *agentsv1alpha1.Sandbox {
	c := corev1.Container{Name: "sandbox", Image: f.image, Command: command}
	envMap, _ := parsePairs(f.env, "--env") // checked by options
	for _, k := range slices.Sorted(maps.Keys(envMap)) {
		c.Env = append(c.Env, corev1.EnvVar{Name: k, Value: envMap[k]})
	}
	sb := &agentsv1alpha1.Sandbox{}
	if f.name == "" {
		sb.GenerateName = "sandbox-"
	}
	sb.Spec.PodTemplate.Spec.Containers = []corev1.Container{c}
	return sb
}

func (a *app) createCommand() *cobra.Command {
	f := createFlags{out: newOutputFlags()}
	cmd := &cobra.Command{
		Use:   "create (--template TEMPLATE | --image IMAGE) [--name NAME] [flags] [-- COMMAND [ARG...]]",
		Short: "Create a sandbox (a SandboxClaim, or a Sandbox from an image) and wait until it is ready",
		Long: `Create a SandboxClaim of a SandboxTemplate (--template), or a Sandbox without a claim
running one image (--image; the command after -- replaces the image's entrypoint), and wait
until it has a pod IP. On a terminal (or with --progress) the wait's progress, the elapsed
time and the current Ready reason, goes to stderr. The claim's (or Sandbox's) name goes to
stdout, so NAME=$(sbx create --template python) works in scripts; -o json, yaml or name
prints the object as kubectl create does. If waiting fails, what was created is deleted
again unless --keep-on-failure is given.
--on-create commands run in the sandbox (sh -c), in order, once it is ready and before
sbx create returns; if one fails (exit status not 0), sbx create fails with its
output and the sandbox is deleted again unless --keep-on-failure is given.
--egress (with --image) limits the Sandbox's outbound traffic with a NetworkPolicy made before
its pod: deny-all blocks everything, DNS included; restricted allows the --egress-cidr
destinations, the --egress-domain names and DNS (port 53); allow-all makes no policy. It needs a
CNI that enforces NetworkPolicy, and for names Cilium; elsewhere a Sandbox that names domains
gets no pod (docs/egress.md).`,
		Example: `  sbx create --template python
  sbx create --template python --name conv-42 --ttl 1h --env API_MODE=test -l team=a
  sbx create --template python --warmpool none --timeout 5m
  sbx create --template python --on-create 'pip install -r requirements.txt'
  sbx create --image python:3.12 --egress deny-all -- sleep infinity
  sbx create --image python:3.12 --egress restricted --egress-cidr 10.0.0.0/8 --egress-cidr 203.0.113.7 -- sleep infinity
  sbx create --image python:3.12 --egress restricted --egress-domain pypi.org --egress-domain '*.pythonhosted.org' -- sleep infinity`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return a.create(cmd, &f, args) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.template, "template", "", "SandboxTemplate to create the sandbox from (a claim)")
	fl.StringVar(&f.image, "image", "", "image of a Sandbox without a claim (instead of --template)")
	fl.StringVar(&f.name, "name", "", "claim or Sandbox name (default: generated from the template name, or sandbox-xxxxx)")
	fl.StringArrayVar(&f.env, "env", nil, "environment variable K=V for the sandbox's container (repeatable; a template must allow env injection)")
	fl.StringArrayVarP(&f.labels, "label", "l", nil, "label k=v on the claim (copied to the Sandbox) or the Sandbox (repeatable)")
	fl.StringArrayVar(&f.podLabels, "pod-label", nil, "label k=v on the sandbox pod (repeatable)")
	fl.StringVar(&f.warmPool, "warmpool", "", `warm pool policy: "none", "default" or a pool name (default: the API's, "default")`)
	fl.StringVar(&f.egress, "egress", "", "egress mode of an --image Sandbox: allow-all, deny-all (no egress, DNS included) or restricted (--egress-cidr and DNS only)")
	fl.StringArrayVar(&f.egressCIDRs, "egress-cidr", nil, "destination CIDR (or IP) that --egress restricted allows (repeatable)")
	fl.StringArrayVar(&f.egressDomains, "egress-domain", nil, "host name (pypi.org) or one-label wildcard (*.github.com) that --egress restricted allows (repeatable)")
	fl.DurationVar(&f.idle, "idle-timeout", 0, "pause the sandbox after this long (at least 10s) with no request and no command running; the next request through the router resumes it")
	fl.DurationVar(&f.ttl, "ttl", 0, "shut the sandbox down after this long (spec.lifecycle.shutdownTime); refresh with sbx keepalive")
	fl.StringVar(&f.shutdownPolicy, "shutdown-policy", "", "what happens at the TTL: Delete, DeleteForeground (claims) or Retain (the API default)")
	fl.DurationVar(&f.timeout, "timeout", 0, "how long to wait for the sandbox to be ready (default 2m)")
	fl.BoolVar(&f.noWait, "no-wait", false, "return once the claim or Sandbox exists, without waiting")
	fl.BoolVar(&f.keep, "keep-on-failure", false, "keep what was created when waiting for it or an --on-create command fails")
	fl.StringArrayVar(&f.onCreate, "on-create", nil, "shell command run in the sandbox once it is ready, before returning (repeatable, in order)")
	addProgressFlag(fl, &f.progress)
	f.out.addFlags(cmd, false, "the bare name")
	return cmd
}

// create runs sbx create once the flags are parsed.
func (a *app) create(cmd *cobra.Command, f *createFlags, args []string) error {
	if err := f.check(args); err != nil {
		return err
	}
	p, err := f.out.printer()
	if err != nil {
		return err
	}
	opts, err := f.options()
	if err != nil {
		return err
	}
	c, err := a.client()
	if err != nil {
		return err
	}
	defer c.Close()
	progress, stop := a.startProgress(cmd, f.progress, f.out.given())
	start := time.Now()
	if progress != nil {
		opts = append(opts, progress)
	}
	var sb *sdk.Sandbox
	if f.image != "" {
		sb, err = c.CreateSandbox(cmd.Context(), f.sandbox(args), opts...)
	} else {
		sb, err = c.Create(cmd.Context(), f.template, opts...)
	}
	stop()
	if err != nil {
		return err
	}
	if p != nil {
		return printObjects(p, a.streams.Out, []*sdk.Sandbox{sb}, false)
	}
	if !f.noWait {
		fmt.Fprintf(a.streams.ErrOut, "sandbox %s ready in %s (sandbox %s, pod IP %s)\n", sb.Name(),
			time.Since(start).Round(time.Millisecond), sb.SandboxName(), strings.Join(sb.PodIPs(), ","))
	}
	fmt.Fprintln(a.streams.Out, sb.Name())
	return nil
}

func parseShutdownPolicy(s string) (extv1alpha1.ShutdownPolicy, error) {
	for _, p := range []extv1alpha1.ShutdownPolicy{extv1alpha1.ShutdownPolicyDelete, extv1alpha1.ShutdownPolicyDeleteForeground, extv1alpha1.ShutdownPolicyRetain} {
		if strings.EqualFold(s, string(p)) {
			return p, nil
		}
	}
	return "", fmt.Errorf("--shutdown-policy must be Delete, DeleteForeground or Retain, not %q", s)
}

// parsePairs turns repeated K=V flags into a map.
func parsePairs(pairs []string, flag string) (map[string]string, error) {
	if len(pairs) == 0 {
		return nil, nil
	}
	m := make(map[string]string, len(pairs))
	for _, p := range pairs {
		k, v, ok := strings.Cut(p, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("%s %q: want KEY=VALUE", flag, p)
		}
		m[k] = v
	}
	return m, nil
}
