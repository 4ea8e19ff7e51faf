package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/agent-sandbox/agent-sandbox/pkg/sdk"
)

// app holds what the commands share: the streams, the global flags and how to build an SDK
// client from them.
type app struct {
	streams genericiooptions.IOStreams
	// name is how the user invoked sbx: "sbx", or "kubectl sbx" as a kubectl plugin.
	name string

	// kube are kubectl's connection flags (--kubeconfig, --context, -n, --as, ...).
	kube *genericclioptions.ConfigFlags
	g    globalFlags
}

// globalFlags are sbx's own global flags: how to reach sandboxd.
type globalFlags struct {
	router, routerToken, mode string
	sandboxPort               int
	container                 string
}

func newApp(name string, streams genericiooptions.IOStreams) *app {
	return &app{
		streams: streams,
		name:    name,
		// As kubectl makes them (cmd.NewDefaultKubectlCommand), so every flag means the same.
		kube: genericclioptions.NewConfigFlags(true).WithDeprecatedPasswordFlag().WithWarningPrinter(streams),
	}
}

// invokedName is the name sbx shows in its usage lines: a binary called kubectl-sbx is run
// by kubectl as the plugin `kubectl sbx`.
func invokedName(arg0 string) string {
	base := strings.TrimSuffix(filepath.Base(arg0), ".exe")
	if plugin, ok := strings.CutPrefix(base, "kubectl-"); ok && plugin != "" {
		return "kubectl " + plugin
	}
	return "sbx"
}

// exitError carries a command's exit status out of cobra without a message.
type exitError struct{ code int }

func (e *exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// run executes the command line and returns the process exit code.
func (a *app) run(ctx context.Context, args []string) int {
	root := a.rootCommand()
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	var ee *exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.code
	}
	fmt.Fprintln(a.streams.ErrOut, "error:", err)
	return 1
}

func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "sbx",
		Short: "Create agent sandboxes on Kubernetes and work in them",
		Long: `sbx creates sandboxes (SandboxClaims of a SandboxTemplate), runs commands in them,
copies files in and out, pauses, resumes and deletes them. It reaches the sandboxes
through the sandbox-router (--router), directly (inside the cluster), through a
port-forward (from a laptop), or through the Kubernetes exec API (--mode exec, for
images without sandboxd). The connection flags are kubectl's; installed as kubectl-sbx
on the PATH, it runs as "kubectl sbx".`,
		SilenceUsage:  true,
		SilenceErrors: true,
		// Usage lines then read "kubectl sbx ls" when run as a kubectl plugin.
		Annotations: map[string]string{cobra.CommandDisplayNameAnnotation: a.name},
	}
	root.SetIn(a.streams.In)
	root.SetOut(a.streams.Out)
	root.SetErr(a.streams.ErrOut)
	pf := root.PersistentFlags()
	a.kube.AddFlags(pf)
	pf.StringVar(&a.g.router, "router", os.Getenv("SBX_ROUTER"), "sandbox-router URL, such as http://sandbox-router-svc.agent-sandbox-system:8080 (env SBX_ROUTER)")
	pf.StringVar(&a.g.mode, "mode", envOr("SBX_MODE", string(sdk.ModeAuto)), "how to reach sandboxes: "+modeNames()+" (env SBX_MODE)")
	pf.IntVar(&a.g.sandboxPort, "sandbox-port", sdk.DefaultSandboxPort, "port of sandboxd in the sandbox pod")
	pf.StringVar(&a.g.container, "container", "", "container to exec in with --mode exec (default: the pod's default container)")
	a.g.routerToken = os.Getenv("SBX_ROUTER_TOKEN")

	root.AddCommand(
		a.createCommand(),
		a.lsCommand(),
		a.getCommand(),
		a.execCommand(),
		a.cpCommand(),
		a.pauseCommand(),
		a.forkCommand(),
		a.resumeCommand(),
		a.rmCommand(),
		a.keepaliveCommand(),
		a.checkCommand(),
		a.e2bKeyCommand(),
	)
	if a.name != "sbx" {
		for _, c := range root.Commands() {
			c.Example = strings.ReplaceAll(c.Example, "sbx ", a.name+" ")
		}
	}
	return root
}

// serverFlagWithoutShorthand is kubectl's --server for a command whose -s means something else
// (exec's --shell): the command's own flag of that name hides the inherited one, and with it
// kubectl's -s.
func (a *app) serverFlagWithoutShorthand(fs *pflag.FlagSet) {
	fs.StringVar(a.kube.APIServer, "server", *a.kube.APIServer, "The address and port of the Kubernetes API server")
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func modeNames() string {
	names := make([]string, len(sdk.Modes))
	for i, m := range sdk.Modes {
		names[i] = string(m)
	}
	return strings.Join(names, ", ")
}

// client builds the SDK client from the global flags.
func (a *app) client() (*sdk.Client, error) {
	mode, err := sdk.ParseMode(a.g.mode)
	if err != nil {
		return nil, fmt.Errorf("--mode: %w", err)
	}
	cfg, err := a.kube.ToRESTConfig()
	if err != nil {
		if clientcmd.IsEmptyConfig(err) {
			return nil, errors.New("no Kubernetes configuration found: pass a kubeconfig (--kubeconfig, $KUBECONFIG or ~/.kube/config), --server, or run inside a pod")
		}
		return nil, fmt.Errorf("loading Kubernetes configuration: %w", err)
	}
	ns, _, err := a.kube.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return nil, fmt.Errorf("finding the namespace: %w", err)
	}
	return sdk.New(sdk.Options{
		RESTConfig:  cfg,
		Namespace:   ns,
		Mode:        mode,
		RouterURL:   a.g.router,
		RouterToken: a.g.routerToken,
		SandboxPort: a.g.sandboxPort,
		Container:   a.g.container,
		UserAgent:   "sbx",
	})
}

// isTerminal reports whether v is a terminal file.
func isTerminal(v any) bool {
	f, ok := v.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
