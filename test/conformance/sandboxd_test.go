package conformance

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	processv1 "github.com/agent-sandbox/agent-sandbox/pkg/proto/process/v1"
)

// TestFilesystemV1: upstream sandboxd's REST API (/v1/files, /v1/health, /v1/metadata) as the
// SDKs' sandboxd runtime uses it: PUT with a raw octet-stream body, paths quoted with "/" as %2F
// (Python's quote(path, safe="") and the Go SDK's percentEncode agree), HEAD for exists.
func TestFilesystemV1(t *testing.T) {
	steps := []exchange{
		{name: "python write", client: python, method: "PUT", path: "v1/files/work%2Fmain.py", body: []byte("print(1)\n"),
			contentType: "application/octet-stream", wantStatus: 204},
		{name: "go write", client: goSDK, method: "PUT", path: "v1/files/work%2Fdata.bin", body: []byte{0, 1, 2},
			contentType: "application/octet-stream", wantStatus: 204},
		{name: "write with mode", client: goSDK, method: "PUT", path: "v1/files/work%2Frun.sh?mode=0755", body: []byte("#!/bin/sh\n"),
			contentType: "application/octet-stream", wantStatus: 204},
		{name: "read", client: python, method: "GET", path: "v1/files/work%2Fmain.py",
			wantStatus: 200, wantType: "application/octet-stream", wantBody: "print(1)\n"},
		{name: "list", client: goSDK, method: "GET", path: "v1/files/work", wantStatus: 200, wantType: "application/json",
			wantJSON: `{"path":"/work","entries":[
				{"name":"data.bin","size":3,"type":"file","mode":"0644"},
				{"name":"main.py","size":9,"type":"file","mode":"0644"},
				{"name":"run.sh","size":10,"type":"file","mode":"0755"}]}`, ignore: []string{"modified_at"}},
		{name: "exists", client: python, method: "HEAD", path: "v1/files/work%2Fmain.py", wantStatus: 200},
		{name: "exists not", client: goSDK, method: "HEAD", path: "v1/files/work%2Fnope", wantStatus: 404},
		{name: "read missing", client: goSDK, method: "GET", path: "v1/files/work%2Fnope",
			wantStatus: 404, wantJSON: `{"code":"NOT_FOUND","message":"not found"}`},
		{name: "read outside the root", client: python, method: "GET", path: "v1/files/..%2F..%2Fetc%2Fpasswd",
			wantStatus: 403, wantJSON: `{"code":"PERMISSION_DENIED","message":"path escapes the sandbox root"}`},
		{name: "bad mode", client: goSDK, method: "PUT", path: "v1/files/x?mode=rwx", body: []byte("x"),
			contentType: "application/octet-stream", wantStatus: 400, wantJSON: `{"code":"INVALID_ARGUMENT","message":"mode must be octal permission bits like 0644"}`},
		{name: "delete non-empty directory", client: python, method: "DELETE", path: "v1/files/work",
			wantStatus: 409, wantJSON: `{"code":"CONFLICT","message":"directory not empty; add ?recursive=true"}`},
		{name: "delete a file", client: goSDK, method: "DELETE", path: "v1/files/work%2Fdata.bin", wantStatus: 204},
		{name: "delete recursively", client: python, method: "DELETE", path: "v1/files/work?recursive=true", wantStatus: 204},
		{name: "health", client: python, method: "GET", path: "v1/health", wantStatus: 200,
			wantJSON: `{"status":"ok"}`, ignore: []string{"uptime_seconds"}},
	}
	forEachTarget(t, func(t *testing.T, tg target, root string) {
		for _, x := range steps {
			t.Run(x.name, func(t *testing.T) { x.run(t, tg) })
		}
		if _, err := os.Stat(filepath.Join(root, "work")); !os.IsNotExist(err) {
			t.Fatalf("work/ after the recursive delete: %v, want it gone", err)
		}
		resp := send(t, tg, goSDK, "GET", "v1/metadata", nil, "")
		var md struct {
			Env map[string]string `json:"env"`
		}
		if err := json.Unmarshal(readBody(t, resp), &md); err != nil || resp.StatusCode != 200 || md.Env == nil {
			t.Fatalf("metadata: status %d, %v, env %v; want 200 with an env object", resp.StatusCode, err, md.Env)
		}
	})
}

// routerMetadata adds the router headers to every gRPC call, for clients that reach sandboxd's
// ProcessService through the router.
func routerMetadata(tg target) grpc.DialOption {
	var kv []string
	for k, vs := range tg.headers {
		kv = append(kv, strings.ToLower(k), vs[0])
	}
	return grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		return invoker(metadata.AppendToOutgoingContext(ctx, kv...), method, req, reply, cc, opts...)
	})
}

func routerStreamMetadata(tg target) grpc.DialOption {
	var kv []string
	for k, vs := range tg.headers {
		kv = append(kv, strings.ToLower(k), vs[0])
	}
	return grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		return streamer(metadata.AppendToOutgoingContext(ctx, kv...), desc, cc, method, opts...)
	})
}

// processClient dials as the upstream Go SDK does (grpc.NewClient, insecure credentials).
func processClient(t *testing.T, tg target) processv1.ProcessServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(tg.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()),
		routerMetadata(tg), routerStreamMetadata(tg))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return processv1.NewProcessServiceClient(conn)
}

// TestProcessServiceExecute: Commands.Run of both SDKs in sandboxd mode, a gRPC Execute of
// ["/bin/sh", "-c", command].
func TestProcessServiceExecute(t *testing.T) {
	tests := []struct {
		name     string
		command  []string
		wantCode codes.Code
		wantExit int32
		wantOut  string
		wantErr  string
	}{
		{"output and exit code", []string{"/bin/sh", "-c", "echo hello; echo oops >&2; exit 2"}, codes.OK, 2, "hello\n", "oops\n"},
		{"pipes through the shell", []string{"/bin/sh", "-c", "printf 'a\\nb\\n' | wc -l"}, codes.OK, 0, "2\n", ""},
		{"missing program", []string{"/no/such/program"}, codes.NotFound, 0, "", ""},
		{"empty command", nil, codes.InvalidArgument, 0, "", ""},
	}
	forEachTarget(t, func(t *testing.T, tg target, _ string) {
		c := processClient(t, tg)
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				resp, err := c.Execute(ctx, &processv1.ExecuteRequest{Config: &processv1.ProcessConfig{Command: tc.command}})
				if status.Code(err) != tc.wantCode {
					t.Fatalf("Execute: %v, want %v", err, tc.wantCode)
				}
				if err == nil && (resp.GetExitCode() != tc.wantExit || string(resp.GetStdout()) != tc.wantOut || string(resp.GetStderr()) != tc.wantErr) {
					t.Fatalf("exit %d stdout %q stderr %q; want %d %q %q", resp.GetExitCode(), resp.GetStdout(), resp.GetStderr(), tc.wantExit, tc.wantOut, tc.wantErr)
				}
			})
		}
	})
}

// TestProcessServiceStart: a streamed command fed through WriteStdin, as an interactive client
// drives it: init event, output, exit event.
func TestProcessServiceStart(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target, _ string) {
		c := processClient(t, tg)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		st, err := c.Start(ctx, &processv1.StartRequest{Config: &processv1.ProcessConfig{Command: []string{"/bin/sh", "-c", "tr a-z A-Z"}}})
		if err != nil {
			t.Fatal(err)
		}
		first, err := st.Recv()
		if err != nil || first.GetInit() == nil {
			t.Fatalf("first event %v, %v; want the init event", first, err)
		}
		pid := first.GetInit().GetProcessId()
		for _, in := range []*processv1.WriteStdinRequest{
			{ProcessId: pid, Payload: &processv1.WriteStdinRequest_Input{Input: []byte("shout\n")}},
			{ProcessId: pid, Payload: &processv1.WriteStdinRequest_Eof{Eof: &emptypb.Empty{}}},
		} {
			if _, err := c.WriteStdin(ctx, in); err != nil {
				t.Fatal(err)
			}
		}
		var out strings.Builder
		for {
			ev, err := st.Recv()
			if err != nil {
				t.Fatalf("stream ended without an exit event: %v (stdout %q)", err, out.String())
			}
			out.Write(ev.GetStdout())
			if ex := ev.GetExit(); ex != nil {
				if out.String() != "SHOUT\n" || ex.GetExitCode() != 0 {
					t.Fatalf("stdout %q exit %d, want SHOUT and 0", out.String(), ex.GetExitCode())
				}
				return
			}
		}
	})
}
