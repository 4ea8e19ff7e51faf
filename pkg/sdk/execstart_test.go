package sdk

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// ModeExec's detached jobs (the harness flow's background jobs over the exec API) must run in images
// that have no nohup, such as busybox-static ones: the job is detached with the shell alone.
func TestExecModeStartRunsTheJobInAnImageWithoutNohup(t *testing.T) {
	ctx := testCtx(t)
	p := newPlane(t, ModeExec)
	out := filepath.Join(t.TempDir(), "job.out")
	noTools := t.TempDir() // PATH with nothing in it: only shell builtins and absolute paths work
	proc, err := p.sb.Start(ctx, Shell(`echo done > "$OUT"`), WithEnv(map[string]string{"PATH": noTools, "OUT": out}))
	if err != nil || proc.PID == 0 {
		t.Fatalf("Start = %+v, %v; want a PID", proc, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile(out)
		if err == nil && string(b) == "done\n" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the started job never wrote its output (%q, %v): it did not run", b, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
