package components

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/host/hosttest"
	"github.com/agent-sandbox/agent-sandbox/internal/devcluster/spec"
)

func TestContainerdRunsGVisorFromTheBuildCacheWithEverythingInTheStateDir(t *testing.T) {
	c, _ := fakeCluster(t)
	containerd, runsc := containerdConfig(c, "/cache/gvisor"), runscConfig(c, "/cache/gvisor")
	for _, tc := range []struct {
		name, config, want string
	}{
		{"containerd has a runtime named as RuntimeClass gvisor's handler", containerd,
			`[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runsc]`},
		{"containerd starts gVisor's shim", containerd, `runtime_type = "io.containerd.runsc.v1"`},
		{"the shim's options are read as runsc options", containerd, `TypeUrl = "io.containerd.runsc.v1.options"`},
		{"the shim's options file is in the state dir", containerd, `ConfigPath = "` + c.Cfg.Path("runsc", "runsc.toml") + `"`},
		{"runc stays the default runtime", containerd, `default_runtime_name = "runc"`},
		{"runsc is the restoring wrapper in the state dir", runsc, `binary_name = "` + c.Cfg.Path("runsc", "bin", "runsc") + `"`},
		{"runsc pods' specs carry the restore annotation of their pod", containerd, `pod_annotations = ["dev.agent-sandbox.restore-image"]`},
		{"runsc keeps its containers' state in the state dir", runsc, `root = "` + c.Cfg.Path("runsc", "root") + `"`},
		{"systrap: kvm hangs on this nested VM", runsc, `platform = "systrap"`},
		{"a restored sandbox may carry its new pod's cgroup parent", runsc, `restore-spec-validation = "warning"`},
		{"each shim logs to a file of its own in the state dir's logs", runsc, `log_path = "` + c.Cfg.Path("logs", "runsc") + `/"`},
		{"runsc logs per sandbox and command into the state dir's logs", runsc,
			`debug-log = "` + c.Cfg.Path("logs", "runsc", "%ID%", "runsc.%COMMAND%.log") + `"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !slices.Contains(trimmedLines(tc.config), tc.want) {
				t.Errorf("config lacks the line %s:\n%s", tc.want, tc.config)
			}
		})
	}
}

func TestContainerdFindsTheShimsWrapperFirstOnItsPath(t *testing.T) {
	c, _ := fakeCluster(t)
	c.Bins.GVisor = "/cache/gvisor"
	comp, err := containerd(c)
	if err != nil {
		t.Fatal(err)
	}
	var path string
	for _, e := range comp.Env {
		if v, ok := strings.CutPrefix(e, "PATH="); ok {
			path = v
		}
	}
	if first, _, _ := strings.Cut(path, ":"); first != shimBinDir(c) {
		t.Errorf("containerd's PATH = %q, want the shim's wrapper dir %s first (nothing is installed on the host)", path, shimBinDir(c))
	}
	wrapper, err := os.ReadFile(filepath.Join(shimBinDir(c), runscShim))
	if err != nil || !strings.Contains(string(wrapper), `shim="/cache/gvisor/containerd-shim-runsc-v1"`) {
		t.Errorf("the wrapper %s does not run the cached shim: %v\n%s", runscShim, err, wrapper)
	}
}

// fakeShim is a shim that prints what containerd 2's shim library prints on start, and
// "ran <args>" otherwise; it fails when FAIL is set.
const fakeShim = `#!/bin/sh
[ -n "$FAIL" ] && { echo "start failed: no"; exit 1; }
for last; do :; done
if [ "$last" = start ]; then printf '{"version":2,"address":"unix:///run/containerd/s/abc","protocol":"ttrpc"}\n'; exit 0; fi
printf 'ran %s' "$*"
`

func TestTheShimsWrapperGivesContainerd16TheBareAddress(t *testing.T) {
	c, _ := fakeCluster(t)
	if err := writeRunscConfig(c, "/cache/gvisor"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, runscShim), []byte(fakeShim), 0o755); err != nil {
		t.Fatal(err)
	}
	wrapper := filepath.Join(dir, "wrapper")
	if err := os.WriteFile(wrapper, []byte(shimWrapper(c, dir)), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		args    []string
		env     string
		want    string
		wantErr bool
	}{
		{name: "start prints the address alone", args: []string{"-namespace", "k8s.io", "-id", "x", "start"}, want: "unix:///run/containerd/s/abc"},
		{name: "other commands run the shim as they are", args: []string{"-id", "x", "delete"}, want: "ran -id x delete"},
		{name: "a failed start fails with the shim's output", args: []string{"-id", "x", "start"}, env: "FAIL=1", want: "start failed: no", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(wrapper, tc.args...)
			cmd.Env = append(os.Environ(), tc.env)
			cmd.Dir = t.TempDir() // the bundle
			out, err := cmd.Output()
			if string(out) != tc.want || (err != nil) != tc.wantErr {
				t.Errorf("wrapper %v = %q, %v; want %q (error: %v)", tc.args, out, err, tc.want, tc.wantErr)
			}
			copied, _ := os.ReadFile(filepath.Join(cmd.Dir, "config.toml"))
			if isStart := tc.args[len(tc.args)-1] == "start"; isStart != (string(copied) == shimOwnConfig(c)) {
				t.Errorf("wrapper %v left config.toml %q in the bundle; want the shim's own config (with the hibernate server) on start only", tc.args, copied)
			}
		})
	}
}

func TestWritingRunscsConfigMakesItsRoot(t *testing.T) {
	c, _ := fakeCluster(t)
	if err := writeRunscConfig(c, "/cache/gvisor"); err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(runscConfigPath(c)); err != nil || string(data) != runscConfig(c, "/cache/gvisor") {
		t.Errorf("runsc.toml = %q, %v; want the rendered config", data, err)
	}
	if st, err := os.Stat(runscRoot(c)); err != nil || !st.IsDir() {
		t.Errorf("runsc's root %s: %v, want a directory", runscRoot(c), err)
	}
}

func TestTheSandboxRuntimePicksTheControllersDefaultRuntimeClass(t *testing.T) {
	for _, tc := range []struct{ runtime, wantClass string }{
		{spec.SandboxRuntimeGVisor, spec.GVisorRuntimeClass},
		{spec.SandboxRuntimeRunc, ""},
	} {
		t.Run(tc.runtime, func(t *testing.T) {
			c, _ := fakeCluster(t)
			c.Cfg.SandboxRuntime = tc.runtime
			ctrl, _ := chartValues(c, nil)["controller"].(map[string]any)
			if got, ok := ctrl["defaultRuntimeClassName"]; !ok || got != tc.wantClass {
				t.Errorf("controller.defaultRuntimeClassName = %v (set: %v), want %q", got, ok, tc.wantClass)
			}
		})
	}
}

func TestStatusNamesTheSandboxRuntimeOfTheLastUp(t *testing.T) {
	for _, tc := range []struct {
		name, upWith, want string
	}{
		{"gvisor", spec.SandboxRuntimeGVisor, "sandbox runtime: gvisor (RuntimeClass gvisor, containerd handler runsc)"},
		{"runc", spec.SandboxRuntimeRunc, "sandbox runtime: runc (no RuntimeClass)"},
		{"no up yet", "", "sandbox runtime: unknown (no up yet)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := fakeCluster(t)
			if tc.upWith != "" {
				c.Cfg.SandboxRuntime = tc.upWith
				if err := recordMode(c); err != nil {
					t.Fatal(err)
				}
			}
			// A later status runs with the default runtime: the record is what counts.
			c.Cfg.SandboxRuntime = spec.SandboxRuntimeGVisor
			var out bytes.Buffer
			PrintStatus(&out, nil, c)
			if !strings.Contains(out.String(), tc.want+"\n") {
				t.Errorf("status lacks %q:\n%s", tc.want, out.String())
			}
		})
	}
}

func TestRunscCleanupForceDeletesEveryContainerRunscStillKnows(t *testing.T) {
	c, f := fakeCluster(t)
	f.SetFile(runscConfigPath(c), runscConfig(c, "/cache/gvisor"))
	f.Mkdir(filepath.Join(runscRoot(c), ctrNamespace))
	nsRoot := "--root=" + filepath.Join(runscRoot(c), ctrNamespace)
	f.OnRun = func(_ *hosttest.Fake, name string, args []string) (string, bool, error) {
		if name == "/cache/gvisor/runsc" && slices.Contains(args, "list") {
			return "pod-a\npod-b\n", true, nil
		}
		return "", name == "/cache/gvisor/runsc", nil
	}
	if err := cleanupRunsc(c); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"runsc " + nsRoot + " delete -force pod-a", "runsc " + nsRoot + " delete -force pod-b"} {
		if !slices.Contains(f.Calls, want) {
			t.Errorf("cleanup did not run %q: %q", want, f.Calls)
		}
	}
}

func TestRunscProcessesAreTheOnesWorkingOnOurRoot(t *testing.T) {
	root := "/state/runsc/root"
	start := func(argv ...string) int {
		t.Helper()
		// sh keeps the argv it is given in /proc/<pid>/cmdline: $0 is argv[1] of -c.
		cmd := &exec.Cmd{Path: "/bin/sh", Args: append([]string{argv[0], "-c", "while :; do sleep 1; done"}, argv[1:]...)}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd.Process.Pid
	}
	ours := []int{
		start("runsc-sandbox", "--root="+root+"/k8s.io"),
		start("runsc-gofer", "--root="+root+"/k8s.io"),
		start("/cache/gvisor/runsc", "--root="+root),
	}
	others := []int{
		start("runsc-sandbox", "--root=/state/runsc/rootless/k8s.io"),
		start("runsc-sandbox", "--root=/elsewhere/k8s.io"),
		start("containerd-shim-runc-v2", "--root="+root),
	}
	got := runscProcesses(root)
	for _, pid := range ours {
		if !slices.Contains(got, pid) {
			t.Errorf("process %d of runsc on %s not found (found %v)", pid, root, got)
		}
	}
	for _, pid := range others {
		if slices.Contains(got, pid) {
			t.Errorf("process %d is not runsc on %s but was found", pid, root)
		}
	}
}

func trimmedLines(s string) []string {
	lines := strings.Split(s, "\n")
	for i := range lines {
		lines[i] = strings.TrimSpace(lines[i])
	}
	return lines
}
