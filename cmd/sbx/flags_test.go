package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/yaml"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	"github.com/agent-sandbox/agent-sandbox/internal/testenv"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

func TestInvokedName(t *testing.T) {
	tests := []struct{ arg0, want string }{
		{"sbx", "sbx"},
		{"/usr/local/bin/sbx", "sbx"},
		{"/home/me/bin/kubectl-sbx", "kubectl sbx"},
		{"kubectl-sbx.exe", "kubectl sbx"},
		{"sbx-linux-amd64", "sbx"},
		{"kubectl-", "sbx"},
	}
	for _, tc := range tests {
		if got := invokedName(tc.arg0); got != tc.want {
			t.Errorf("invokedName(%q) = %q, want %q", tc.arg0, got, tc.want)
		}
	}
}

// Help follows the name sbx was invoked by: `kubectl sbx ...` when kubectl runs it as a plugin.
func TestHelpFollowsInvokedName(t *testing.T) {
	tests := []struct {
		name, args string
		want       []string
		notWant    string
	}{
		{"sbx", "get --help", []string{"sbx get NAME", "  sbx get conv-42 -o yaml"}, "kubectl sbx"},
		{"kubectl sbx", "get --help", []string{"kubectl sbx get NAME", "  kubectl sbx get conv-42 -o yaml"}, ""},
		{"kubectl sbx", "--help", []string{"kubectl sbx [command]", `Use "kubectl sbx [command] --help"`}, ""},
		{"kubectl sbx", "exec --help", []string{"kubectl sbx exec NAME", "  cat data.csv | kubectl sbx exec conv-42 -i -- wc -l"}, ""},
	}
	for _, tc := range tests {
		streams, _, out, _ := genericiooptions.NewTestIOStreams()
		if code := newApp(tc.name, streams).run(t.Context(), strings.Fields(tc.args)); code != 0 {
			t.Fatalf("%s %s: exit %d", tc.name, tc.args, code)
		}
		for _, want := range tc.want {
			if !strings.Contains(out.String(), want) {
				t.Errorf("%s %s: help lacks %q:\n%s", tc.name, tc.args, want, out)
			}
		}
		if tc.notWant != "" && strings.Contains(out.String(), tc.notWant) {
			t.Errorf("%s %s: help mentions %q:\n%s", tc.name, tc.args, tc.notWant, out)
		}
	}
}

// sbx has kubectl's connection flags, with kubectl's shorthands, next to its own.
func TestKubectlConnectionFlags(t *testing.T) {
	root := newApp("sbx", genericiooptions.NewTestIOStreamsDiscard()).rootCommand()
	tests := []struct{ flag, shorthand string }{
		{"kubeconfig", ""}, {"context", ""}, {"cluster", ""}, {"user", ""}, {"namespace", "n"},
		{"server", "s"}, {"token", ""}, {"as", ""}, {"as-group", ""}, {"as-uid", ""},
		{"request-timeout", ""}, {"certificate-authority", ""}, {"client-certificate", ""},
		{"client-key", ""}, {"insecure-skip-tls-verify", ""}, {"tls-server-name", ""},
		{"username", ""}, {"password", ""}, {"disable-compression", ""}, {"cache-dir", ""},
		// sbx's own.
		{"mode", ""}, {"router", ""}, {"sandbox-port", ""}, {"container", ""},
	}
	for _, tc := range tests {
		f := root.PersistentFlags().Lookup(tc.flag)
		if f == nil {
			t.Errorf("no global flag --%s", tc.flag)
			continue
		}
		if f.Shorthand != tc.shorthand {
			t.Errorf("--%s has shorthand %q, want %q", tc.flag, f.Shorthand, tc.shorthand)
		}
	}
}

// In exec, -s stays --shell; --server is still there, without a shorthand.
func TestExecKeepsDashSForShell(t *testing.T) {
	app := newApp("sbx", genericiooptions.NewTestIOStreamsDiscard())
	execCmd, _, err := app.rootCommand().Find([]string{"exec"})
	if err != nil {
		t.Fatal(err)
	}
	if f := execCmd.Flags().ShorthandLookup("s"); f == nil || f.Name != "shell" {
		t.Errorf("exec -s is %v, want --shell", f)
	}
	if f := execCmd.Flags().Lookup("server"); f == nil || f.Shorthand != "" {
		t.Errorf("exec --server is %v, want the flag without a shorthand", f)
	}
	if err := execCmd.ParseFlags([]string{"--server", "https://api.example:6443", "-s"}); err != nil {
		t.Fatal(err)
	}
	if got := *app.kube.APIServer; got != "https://api.example:6443" {
		t.Errorf("exec --server set the API server to %q, want https://api.example:6443", got)
	}
}

// The connection flags reach the API server: impersonation as kubectl does it, and --server
// with a token instead of the kubeconfig's (a wrong one, refused).
func TestConnectionFlagsReachTheAPIServer(t *testing.T) {
	c := newCLI(t)
	must(t, env.Client.Create(t.Context(), testwrap.MakeClaim(c.ns, "conv-1").Template("python").Obj()))
	tests := []struct {
		name  string
		flags []string
		want  string // in stderr; "" for success
	}{
		{"as the admin", nil, ""},
		{"as a user without rights", []string{"--as", "mallory"}, `User "mallory" cannot get resource "sandboxclaims"`},
		{"as a user in system:masters", []string{"--as", "mallory", "--as-group", "system:masters"}, ""},
		{"a bad token", []string{"--kubeconfig", nowhereKubeconfig, "--server", env.Config.Host, "--insecure-skip-tls-verify", "--token", "not-a-token"}, "the server has asked for the client to provide credentials"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := c.run("", append([]string{"get", "conv-1", "--request-timeout", "30s"}, tc.flags...)...)
			if tc.want == "" && (r.code != 0 || !strings.Contains(r.stdout, "conv-1")) {
				t.Errorf("sbx get %v: exit %d, stdout %q, stderr %q; want the claim", tc.flags, r.code, r.stdout, r.stderr)
			}
			if tc.want != "" && (r.code != 1 || !strings.Contains(r.stderr, tc.want)) {
				t.Errorf("sbx get %v: exit %d, stderr %q; want exit 1 and %q", tc.flags, r.code, r.stderr, tc.want)
			}
		})
	}
}

// kubectl runs a kubectl-sbx on the PATH as `kubectl sbx`: this test binary, linked under that
// name, becomes sbx (TestMain) and prints the claim as kubectl would.
func TestKubectlPlugin(t *testing.T) {
	testenv.Require(t, "kube-apiserver", "etcd", "kubectl")
	c := newCLI(t)
	must(t, env.Client.Create(t.Context(), testwrap.MakeClaim(c.ns, "conv-1").Template("python").Obj()))
	self, err := os.Executable()
	must(t, err)
	bin := t.TempDir()
	must(t, os.Symlink(self, filepath.Join(bin, "kubectl-sbx")))

	kubectl := func(args ...string) (stdout, stderr string, err error) {
		cmd := exec.CommandContext(t.Context(), env.Binary("kubectl"), args...)
		cmd.Env = append(os.Environ(), "PATH="+bin, "KUBECONFIG="+c.kubeconfig)
		var out, errOut strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err = cmd.Run()
		return out.String(), errOut.String(), err
	}

	out, errOut, err := kubectl("sbx", "get", "conv-1", "-n", c.ns, "-o", "yaml")
	if err != nil {
		t.Fatalf("kubectl sbx get -o yaml: %v\nstderr: %s", err, errOut)
	}
	var cl extv1alpha1.SandboxClaim
	if err := yaml.UnmarshalStrict([]byte(out), &cl); err != nil {
		t.Fatalf("kubectl sbx get -o yaml printed no SandboxClaim: %v\n%s", err, out)
	}
	if cl.Kind != "SandboxClaim" || cl.Namespace != c.ns || cl.Name != "conv-1" || cl.UID == "" {
		t.Errorf("kubectl sbx get -o yaml printed %s %s/%s (uid %q), want the SandboxClaim %s/conv-1 as stored", cl.Kind, cl.Namespace, cl.Name, cl.UID, c.ns)
	}

	out, errOut, err = kubectl("sbx", "ls", "--help")
	if err != nil || !strings.Contains(out, "kubectl sbx ls [-l SELECTOR]") {
		t.Errorf("kubectl sbx ls --help: %v, want the usage line of kubectl sbx ls\nstdout: %s\nstderr: %s", err, out, errOut)
	}
}
