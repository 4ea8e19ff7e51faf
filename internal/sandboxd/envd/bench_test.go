package envd_test

import (
	"testing"

	"connectrpc.com/connect"

	fspb "github.com/agent-sandbox/agent-sandbox/pkg/proto/envd/filesystem"
	pb "github.com/agent-sandbox/agent-sandbox/pkg/proto/envd/process"
)

// BenchmarkStartTrue is one command through Start, as the SDK's
// commands.run does it: start event to end event of /bin/true.
func BenchmarkStartTrue(b *testing.B) {
	e := newEnv(b)
	req := &pb.StartRequest{Process: &pb.ProcessConfig{Cmd: "/bin/true"}}
	for b.Loop() {
		s, err := e.proc.Start(b.Context(), connect.NewRequest(req))
		if err != nil {
			b.Fatal(err)
		}
		for s.Receive() {
		}
		if s.Err() != nil {
			b.Fatal(s.Err())
		}
	}
}

// BenchmarkStat is one unary Filesystem call.
func BenchmarkStat(b *testing.B) {
	e := newEnv(b)
	req := &fspb.StatRequest{Path: "/"}
	for b.Loop() {
		if _, err := e.fs.Stat(b.Context(), connect.NewRequest(req)); err != nil {
			b.Fatal(err)
		}
	}
}
