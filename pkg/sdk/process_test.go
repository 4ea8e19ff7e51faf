package sdk

import (
	"bytes"
	"errors"
	"slices"
	"testing"
)

func TestBackgroundProcesses(t *testing.T) {
	for _, mode := range httpModes {
		t.Run(string(mode), func(t *testing.T) {
			ctx := testCtx(t)
			sb := newPlane(t, mode).sb

			long, err := sb.Start(ctx, Argv("sleep", "300"))
			if err != nil {
				t.Fatal(err)
			}
			if long.ID == "" || long.PID == 0 || !long.Running {
				t.Fatalf("Start = %+v", long)
			}
			procs, err := sb.Processes(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if i := slices.IndexFunc(procs, func(p Process) bool { return p.ID == long.ID }); i < 0 || !procs[i].Running {
				t.Fatalf("Processes = %+v, want %s running", procs, long.ID)
			}
			killed, err := sb.Kill(ctx, long.ID)
			if err != nil {
				t.Fatal(err)
			}
			if killed.Running {
				t.Errorf("after Kill: %+v", killed)
			}
			if _, err := sb.Process(ctx, long.ID); !errors.Is(err, ErrNotFound) {
				t.Errorf("Process after Kill = %v, want ErrNotFound (forgotten)", err)
			}

			short, err := sb.Start(ctx, Shell(`echo "out $WHO"; echo err >&2; exit 3`), WithEnv(map[string]string{"WHO": "bg"}))
			if err != nil {
				t.Fatal(err)
			}
			var stdout, stderr bytes.Buffer
			code, err := sb.FollowLogs(ctx, short.ID, &stdout, &stderr)
			if err != nil {
				t.Fatal(err)
			}
			if code != 3 || stdout.String() != "out bg\n" || stderr.String() != "err\n" {
				t.Errorf("FollowLogs = %d %q %q", code, stdout.String(), stderr.String())
			}
			logs, err := sb.ProcessLogs(ctx, short.ID)
			if err != nil || logs.Stdout != "out bg\n" {
				t.Errorf("ProcessLogs = %+v, %v", logs, err)
			}
			st, err := sb.Process(ctx, short.ID)
			if err != nil || st.Running || st.ExitCode != 3 {
				t.Errorf("Process = %+v, %v", st, err)
			}

			if err := sb.Signal(ctx, "p-nope", "TERM"); !errors.Is(err, ErrNotFound) {
				t.Errorf("Signal unknown = %v, want ErrNotFound", err)
			}
		})
	}
}
