package snapshotlab

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunscWrapperRestoresOnlyAnnotatedStarts runs the wrapper over a fake runsc that records
// its arguments and answers `state` with a bundle whose config.json may name an image.
func TestRunscWrapperRestoresOnlyAnnotatedStarts(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("needs bash")
	}
	dir := t.TempDir()
	fake := filepath.Join(dir, "runsc")
	calls := filepath.Join(dir, "calls")
	script := "#!/bin/sh\necho \"$*\" >> " + calls + "\n" +
		"case \" $* \" in *' state '*) printf '{\\n  \"id\": \"x\",\\n  \"bundle\": \"%s\",\\n  \"pid\": 1\\n}\\n' \"" + dir + "/bundle-$(eval echo \\${$#})\";; esac\n"
	write(t, fake, script, 0o755)
	wrapper := filepath.Join(dir, "wrapper")
	write(t, wrapper, RunscWrapper(fake), 0o755)
	write(t, filepath.Join(dir, "bundle-restored", "config.json"),
		`{"annotations":{"io.kubernetes.cri.container-type":"sandbox","`+RestoreAnnotation+`": "/images/one"}}`, 0o644)
	write(t, filepath.Join(dir, "bundle-fresh", "config.json"), `{"annotations":{}}`, 0o644)

	for _, tc := range []struct {
		name, args, want string
	}{
		{"start of an annotated container restores", "--root=/r --log=/l start restored",
			"--root=/r --log=/l state restored\n--root=/r --log=/l restore --detach --image-path /images/one restored"},
		{"start of a plain container starts", "--root=/r start fresh",
			"--root=/r state fresh\n--root=/r start fresh"},
		{"create passes through", "--root=/r create --bundle /b restored", "--root=/r create --bundle /b restored"},
		{"start with flags after it passes through", "--root=/r start --detach restored", "--root=/r start --detach restored"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_ = os.Remove(calls)
			if out, err := exec.Command(wrapper, strings.Fields(tc.args)...).CombinedOutput(); err != nil {
				t.Fatalf("wrapper %s: %v: %s", tc.args, err, out)
			}
			got, err := os.ReadFile(calls)
			if err != nil {
				t.Fatal(err)
			}
			if strings.TrimSpace(string(got)) != tc.want {
				t.Errorf("wrapper %s ran runsc as\n%s\nwant\n%s", tc.args, got, tc.want)
			}
		})
	}
}

func write(t *testing.T, p, data string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), mode); err != nil {
		t.Fatal(err)
	}
}
