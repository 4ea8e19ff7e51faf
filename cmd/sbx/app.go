package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/agent-sandbox/agent-sandbox/internal/devcluster"
	"github.com/agent-sandbox/agent-sandbox/pkg/sdk"
)

// app holds what the commands share: the streams, the global flags and how
// to build an SDK client (tests replace configure to point it at a test
// API server and sandboxd).
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer

	g globalFlags
	// configure adjusts the SDK options after the flags were applied.
	configure func(*sdk.Options)
}

type globalFlags struct {
	kubeconfig, context, namespace string
	router, routerToken, mode      string
	sandboxPort                    int
	container                      string
}

func newApp(stdin io.Reader, stdout, stderr io.Writer) *app {
	return &app{stdin: stdin, stdout: stdout, stderr: stderr}
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
	fmt.Fprintln(a.stderr, "error:", err)
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
images without sandboxd).`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetIn(a.stdin)
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	pf := root.PersistentFlags()
	pf.StringVar(&a.g.kubeconfig, "kubeconfig", "", "path to the kubeconfig file (default $KUBECONFIG, ~/.kube/config, or in-cluster)")
	pf.StringVar(&a.g.context, "context", "", "kubeconfig context to use")
	pf.StringVarP(&a.g.namespace, "namespace", "n", "", "namespace (default: the context's)")
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
		a.resumeCommand(),
		a.rmCommand(),
		a.keepaliveCommand(),
		a.checkCommand(),
		devcluster.NewCommand(),
	)
	return root
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
	o := sdk.Options{
		Kubeconfig:  a.g.kubeconfig,
		Context:     a.g.context,
		Namespace:   a.g.namespace,
		Mode:        mode,
		RouterURL:   a.g.router,
		RouterToken: a.g.routerToken,
		SandboxPort: a.g.sandboxPort,
		Container:   a.g.container,
		UserAgent:   "sbx",
	}
	if a.configure != nil {
		a.configure(&o)
	}
	return sdk.New(o)
}

// isTerminal reports whether v is a terminal file.
func isTerminal(v any) bool {
	f, ok := v.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
