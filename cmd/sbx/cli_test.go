package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
)

func TestHelpEverywhere(t *testing.T) {
	for _, args := range [][]string{
		{"--help"}, {"create", "--help"}, {"ls", "--help"}, {"get", "--help"}, {"exec", "--help"},
		{"cp", "--help"}, {"pause", "--help"}, {"resume", "--help"}, {"rm", "--help"},
		{"keepalive", "--help"}, {"check", "--help"}, {"fork", "--help"},
	} {
		r := offline(args...)
		if r.code != 0 || !strings.Contains(r.stdout, "Usage:") {
			t.Errorf("sbx %v: exit %d, stdout %q, stderr %q", args, r.code, r.stdout, r.stderr)
		}
	}
}

func TestArgumentErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"create"}, "--template is required"},
		{[]string{"create", "--template", "t", "--env", "NOVALUE"}, `--env "NOVALUE": want KEY=VALUE`},
		{[]string{"create", "--template", "t", "--shutdown-policy", "never"}, "--shutdown-policy must be"},
		{[]string{"create", "--template", "t", "-o", "xml"}, `--output "xml": want one of json, yaml, name`},
		{[]string{"create", "--template", "t", "-o", "wide"}, `--output "wide"`},
		{[]string{"ls", "-o", "xml"}, `--output "xml": want one of wide, json, yaml, name`},
		{[]string{"get", "x", "-o", "table"}, `--output "table"`},
		{[]string{"exec", "box"}, "exec needs a sandbox name and a command"},
		{[]string{"exec", "a", "b", "--", "ls"}, "exec takes one sandbox name before --"},
		{[]string{"get"}, "needs exactly one sandbox name"},
		{[]string{"rm"}, "needs at least one sandbox name"},
		{[]string{"keepalive", "box"}, "--for must be a positive duration"},
		{[]string{"cp", "a", "b"}, "one side must be NAME:PATH"},
		{[]string{"cp", "x:a", "y:b"}, "between two sandboxes"},
		{[]string{"ls", "--mode", "teleport"}, `unknown mode "teleport"`},
		{[]string{"nope"}, `unknown command "nope"`},
		{[]string{"dev", "up"}, `unknown command "dev"`}, // the local cluster is cmd/devcluster's

	}
	for _, tc := range tests {
		r := offline(tc.args...)
		if r.code == 0 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("sbx %v: exit %d, stderr %q; want an error containing %q", tc.args, r.code, r.stderr, tc.want)
		}
	}
}

func TestParseCpArg(t *testing.T) {
	tests := []struct {
		in   string
		want cpArg
	}{
		{"box:src/main.go", cpArg{remote: true, name: "box", path: "src/main.go"}},
		{"box:", cpArg{remote: true, name: "box", path: "."}},
		{"my.box-1:/abs", cpArg{remote: true, name: "my.box-1", path: "/abs"}},
		{"./box:file", cpArg{path: "./box:file"}},
		{"dir/box:file", cpArg{path: "dir/box:file"}},
		{"C:/Users/x", cpArg{path: "C:/Users/x"}},
		{"plain.txt", cpArg{path: "plain.txt"}},
		{"-", cpArg{path: "-"}},
		{":x", cpArg{path: ":x"}},
	}
	for _, tc := range tests {
		if got := parseCpArg(tc.in); got != tc.want {
			t.Errorf("parseCpArg(%q) = %+v, want %+v", tc.in, got, tc.want)
		}
	}
}

func TestPrintTable(t *testing.T) {
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	sbs := exampleSandboxes(t, now)
	var b strings.Builder
	if err := printTable(&b, sbs, false, now); err != nil {
		t.Fatal(err)
	}
	want := `NAME       TEMPLATE   SANDBOX          READY             REASON              AGE
conv-1     python     python-pool-x1   True              DependenciesReady   90m
conv-2     python     <none>           False             TemplateNotFound    3s
ws-alice   <none>     ws-alice         Paused (by you)   <none>              2d
ws-bob     <none>     ws-bob           Paused (idle)     <none>              60m
`
	if b.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	if err := printTable(&b, sbs[:1], true, now); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "10.0.0.7") || !strings.Contains(b.String(), "app=x,team=a") || !strings.Contains(b.String(), "<never>") {
		t.Errorf("wide table:\n%s", b.String())
	}
}

// TestCLIFlow walks one sandbox through every command against the test API
// server and a real sandboxd.
func TestCLIFlow(t *testing.T) {
	c := newCLI(t)

	r := c.mustRun("", "create", "--template", "python", "--name", "conv-1", "--env", "A=1", "-l", "team=a", "--ttl", "1h")
	if strings.TrimSpace(r.stdout) != "conv-1" || !strings.Contains(r.stderr, "sandbox conv-1 ready in") {
		t.Errorf("create: stdout %q stderr %q", r.stdout, r.stderr)
	}
	c.mustRun("", "create", "--template", "node", "--name", "other", "-l", "team=b")

	r = c.mustRun("", "ls", "-l", "team=a")
	if !strings.Contains(r.stdout, "conv-1") || strings.Contains(r.stdout, "other") || !strings.HasPrefix(r.stdout, "NAME") {
		t.Errorf("ls -l team=a:\n%s", r.stdout)
	}
	r = c.mustRun("", "ls", "-o", "wide")
	if !strings.Contains(r.stdout, "127.0.0.1") || !strings.Contains(r.stdout, "other") {
		t.Errorf("ls -o wide:\n%s", r.stdout)
	}
	r = c.mustRun("", "get", "conv-1", "-o", "yaml")
	if !strings.Contains(r.stdout, "kind: SandboxClaim") || !strings.Contains(r.stdout, "name: python") || !strings.Contains(r.stdout, "shutdownTime:") {
		t.Errorf("get -o yaml:\n%s", r.stdout)
	}

	// exec: output, exit code, env, cwd, shell, stdin.
	r = c.run("", "exec", "conv-1", "--", "sh", "-c", "echo out; echo err >&2; exit 7")
	if r.code != 7 || r.stdout != "out\n" || r.stderr != "err\n" {
		t.Errorf("exec exit code: %+v", r)
	}
	if err := os.MkdirAll(filepath.Join(c.d.Root, "repo"), 0o755); err != nil {
		t.Fatal(err)
	}
	r = c.mustRun("", "exec", "conv-1", "--env", "WHO=cli", "--cwd", "repo", "-s", "--", `echo "$WHO in $(basename $PWD)"`)
	if r.stdout != "cli in repo\n" {
		t.Errorf("exec env/cwd: %q", r.stdout)
	}
	r = c.mustRun("line1\nline2\n", "exec", "conv-1", "-i", "--", "wc", "-l")
	if strings.TrimSpace(r.stdout) != "2" {
		t.Errorf("exec -i: %q", r.stdout)
	}
	r = c.run("", "exec", "conv-1", "--timeout", "200ms", "--", "sleep", "30")
	if r.code != 124 || !strings.Contains(r.stderr, "timed out") {
		t.Errorf("exec --timeout: %+v", r)
	}

	// cp: file, directory, stdin/stdout, both ways.
	local := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(local, "proj", "src"), 0o755))
	must(t, os.WriteFile(filepath.Join(local, "proj", "src", "main.py"), []byte("print(1)\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(local, "notes.txt"), []byte("notes"), 0o644))
	c.mustRun("", "cp", filepath.Join(local, "proj"), "conv-1:proj")
	c.mustRun("", "cp", filepath.Join(local, "notes.txt"), "conv-1:proj/")
	c.mustRun("piped", "cp", "-", "conv-1:proj/deep/piped.txt")
	r = c.mustRun("", "exec", "conv-1", "--", "cat", "proj/src/main.py", "proj/notes.txt", "proj/deep/piped.txt")
	if r.stdout != "print(1)\nnotespiped" {
		t.Errorf("after cp up: %q", r.stdout)
	}
	back := filepath.Join(t.TempDir(), "back")
	c.mustRun("", "cp", "conv-1:proj", back)
	if b, err := os.ReadFile(filepath.Join(back, "deep", "piped.txt")); err != nil || string(b) != "piped" {
		t.Errorf("cp down dir: %q %v", b, err)
	}
	c.mustRun("", "cp", "conv-1:proj/notes.txt", local+string(os.PathSeparator)+"sub"+string(os.PathSeparator))
	if b, err := os.ReadFile(filepath.Join(local, "sub", "notes.txt")); err != nil || string(b) != "notes" {
		t.Errorf("cp down file into dir: %q %v", b, err)
	}
	r = c.mustRun("", "cp", "conv-1:proj/src/main.py", "-")
	if r.stdout != "print(1)\n" {
		t.Errorf("cp to stdout: %q", r.stdout)
	}
	if r := c.run("", "cp", "conv-1:missing.txt", "-"); r.code != 1 || !strings.Contains(r.stderr, "not found") {
		t.Errorf("cp missing: %+v", r)
	}

	// keepalive, pause, resume.
	before := time.Now()
	r = c.mustRun("", "keepalive", "conv-1", "--for", "3h")
	if !strings.Contains(r.stdout, "now expires at") {
		t.Errorf("keepalive: %q", r.stdout)
	}
	cl := &extv1alpha1.SandboxClaim{}
	must(t, env.Client.Get(t.Context(), keyOf(c.ns, "conv-1"), cl))
	if got := cl.Spec.Lifecycle.ShutdownTime.Time; got.Before(before.Add(3*time.Hour).Truncate(time.Second)) || got.After(time.Now().Add(3*time.Hour+time.Second)) {
		t.Errorf("shutdownTime = %v", got)
	}
	c.mustRun("", "pause", "conv-1")
	sbObj := &agentsv1alpha1.Sandbox{}
	must(t, env.Client.Get(t.Context(), keyOf(c.ns, "conv-1"), sbObj))
	if sbObj.DesiredReplicas() != 0 {
		t.Errorf("replicas after pause = %d", sbObj.DesiredReplicas())
	}
	r = c.mustRun("", "resume", "conv-1")
	if !strings.Contains(r.stdout, "sandbox conv-1 resumed (pod IP 127.0.0.2)") {
		t.Errorf("resume: %q", r.stdout)
	}
	r = c.mustRun("", "exec", "conv-1", "--", "echo", "back")
	if r.stdout != "back\n" {
		t.Errorf("exec after resume: %q", r.stdout)
	}

	// fork: the stand-in controller restores nothing, so both forks start cold and say so.
	r = c.run("", "fork", "conv-1", "--count", "2")
	if r.code != 1 || strings.Count(r.stdout, "forked from conv-1\n") != 2 || !strings.Contains(r.stderr, "some forks started without the memory of conv-1") {
		t.Errorf("fork without a node agent: %+v; want two forks listed and exit 1 saying they started cold", r)
	}
	for line := range strings.Lines(r.stdout) {
		if fork, ok := strings.CutPrefix(strings.TrimSuffix(line, " forked from conv-1\n"), "sandbox "); ok {
			c.mustRun("", "rm", fork, "--wait")
		}
	}

	// rm.
	c.mustRun("", "rm", "conv-1", "other", "--wait")
	if r := c.run("", "get", "conv-1"); r.code != 1 || !strings.Contains(r.stderr, "not found") {
		t.Errorf("get after rm: %+v", r)
	}
	if r := c.run("", "rm", "conv-1"); r.code != 1 {
		t.Errorf("rm missing: %+v", r)
	}
	c.mustRun("", "rm", "conv-1", "--ignore-not-found")
	r = c.run("", "ls")
	if r.code != 0 || !strings.Contains(r.stderr, "No sandboxes") {
		t.Errorf("ls empty: %+v", r)
	}
}

func TestCLICreateTimeout(t *testing.T) {
	c := newCLI(t)
	// The stand-in controller holds back claims of the template "held".
	tests := []struct {
		name         string
		flags        []string
		wantProgress bool
	}{
		{"not a terminal", nil, false},
		{"with --progress", []string{"--progress"}, true},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			name := fmt.Sprintf("slow-%d", i)
			r := c.run("", append([]string{"create", "--template", "held", "--name", name, "--timeout", "300ms"}, tc.flags...)...)
			if r.code != 1 || r.stdout != "" {
				t.Fatalf("create: %+v, want exit 1 and nothing on stdout", r)
			}
			for _, want := range []string{"sandboxclaim " + c.ns + "/" + name + " not ready after", "Pending", "timed out"} {
				if !strings.Contains(r.stderr, want) {
					t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
				}
			}
			if got := strings.Contains(r.stderr, "waiting for sandboxclaim "+name); got != tc.wantProgress {
				t.Errorf("progress lines on stderr: %v, want %v:\n%s", got, tc.wantProgress, r.stderr)
			}
			err := env.Client.Get(t.Context(), keyOf(c.ns, name), &extv1alpha1.SandboxClaim{})
			if !apierrors.IsNotFound(err) {
				t.Errorf("claim after a failed create: %v, want it deleted", err)
			}
		})
	}
}

// create -o prints the created object as kubectl create does, and nothing else.
func TestCLICreateOutput(t *testing.T) {
	c := newCLI(t)
	r := c.mustRun("", "create", "--template", "python", "--name", "printed", "-o", "yaml")
	var cl extv1alpha1.SandboxClaim
	if err := yaml.UnmarshalStrict([]byte(r.stdout), &cl); err != nil || cl.Kind != "SandboxClaim" || cl.Name != "printed" || cl.UID == "" {
		t.Errorf("create -o yaml printed %q (%v), want the SandboxClaim printed as stored", r.stdout, err)
	}
	if r.stderr != "" {
		t.Errorf("create -o yaml wrote %q on stderr, want nothing", r.stderr)
	}
	r = c.mustRun("", "create", "--template", "python", "--name", "named", "-o", "name")
	if want := "sandboxclaim.extensions.agents.x-k8s.io/named\n"; r.stdout != want {
		t.Errorf("create -o name printed %q, want %q", r.stdout, want)
	}
}

func keyOf(ns, name string) client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: name} }

func TestCLICheck(t *testing.T) {
	c := newCLI(t)
	r := c.mustRun("", "check")
	if !strings.HasPrefix(r.stdout, "ok: CRDs installed") {
		t.Errorf("check: %q", r.stdout)
	}
	r = c.run("", "check", "--router", "http://127.0.0.1:1")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "ok: CRDs installed") ||
		!strings.Contains(r.stderr, "warning: agent-sandbox is usable, with warnings: router at http://127.0.0.1:1 is not reachable") {
		t.Errorf("check with the router down, want exit 0 and a warning: %+v", r)
	}
	r = c.run("", "check", "--router", "http://127.0.0.1:1", "--template", "python")
	if r.code != 1 || !strings.Contains(r.stderr, "router at http://127.0.0.1:1 is not reachable") ||
		!strings.Contains(r.stderr, "SandboxTemplate "+c.ns+"/python does not exist") {
		t.Errorf("check failing: %+v", r)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
