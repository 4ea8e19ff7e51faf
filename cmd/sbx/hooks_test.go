package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
)

func (c *cli) file(name string) string {
	c.t.Helper()
	b, err := os.ReadFile(filepath.Join(c.d.Root, name))
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return string(b)
}

// sbx create --on-create and sbx resume --on-resume run the agent harness's hooks before reporting the
// sandbox; a failing one fails the command with the hook's output.
func TestCLIHooks(t *testing.T) {
	c := newCLI(t)

	c.mustRun("", "create", "--template", "py", "--name", "hooked",
		"--on-create", `echo one > created.log`, "--on-create", `echo two >> created.log`)
	if got, want := c.file("created.log"), "one\ntwo\n"; got != want {
		t.Errorf("created.log after sbx create = %q, want %q", got, want)
	}

	r := c.run("", "create", "--template", "py", "--name", "bad-setup", "--on-create", "echo nope >&2; exit 4")
	if r.code != 1 || !strings.Contains(r.stderr, `onCreate hook "echo nope >&2; exit 4"`) ||
		!strings.Contains(r.stderr, "exited with code 4: nope") || !strings.Contains(r.stderr, "the sandbox was deleted") {
		t.Errorf("failing --on-create: %+v, want exit 1 naming the hook, its exit code and stderr, and the deletion", r)
	}
	err := env.Client.Get(t.Context(), keyOf(c.ns, "bad-setup"), &extv1alpha1.SandboxClaim{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("claim after a failed --on-create: %v, want it deleted", err)
	}

	c.mustRun("", "pause", "hooked")
	r = c.mustRun("", "resume", "hooked", "--on-resume", "echo back > resumed.log")
	if got := c.file("resumed.log"); got != "back\n" || !strings.Contains(r.stdout, "sandbox hooked resumed") {
		t.Errorf("resumed.log after sbx resume = %q (stdout %q), want %q", got, r.stdout, "back\n")
	}
	c.mustRun("", "pause", "hooked")
	r = c.run("", "resume", "hooked", "--on-resume", "exit 5")
	if r.code != 1 || !strings.Contains(r.stderr, `onResume hook "exit 5"`) || !strings.Contains(r.stderr, "left running") {
		t.Errorf("failing --on-resume: %+v, want exit 1 naming the hook and that the sandbox is left running", r)
	}
}
