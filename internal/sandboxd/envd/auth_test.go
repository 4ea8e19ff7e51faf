package envd_test

import (
	"crypto/sha256"
	"encoding/base64"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/agent-sandbox/agent-sandbox/internal/sandboxd/envd"
	fspb "github.com/agent-sandbox/agent-sandbox/pkg/proto/envd/filesystem"
	pb "github.com/agent-sandbox/agent-sandbox/pkg/proto/envd/process"
)

var fixedNow = time.Unix(1_800_000_000, 0)

func withToken(c *envd.Config) {
	c.Token = "s3cret"
	c.Now = func() time.Time { return fixedNow }
}

// sign makes the SDK's v1 file signature.
func sign(path, op, user, token string, exp int64) string {
	raw := path + ":" + op + ":" + user + ":" + token
	if exp != 0 {
		raw += ":" + strconv.FormatInt(exp, 10)
	}
	sum := sha256.Sum256([]byte(raw))
	return "v1_" + base64.RawStdEncoding.EncodeToString(sum[:])
}

func TestRPCsNeedTheAccessToken(t *testing.T) {
	e := newEnv(t, withToken)
	for _, tc := range []struct {
		name string
		hdr  map[string]string
		want connect.Code
	}{
		{"none", nil, connect.CodeUnauthenticated},
		{"wrong", map[string]string{"X-Access-Token": "nope"}, connect.CodeUnauthenticated},
		{"SDK's basic user only", map[string]string{"Authorization": "Basic dXNlcjo="}, connect.CodeUnauthenticated},
		{"X-Access-Token", map[string]string{"X-Access-Token": "s3cret", "Authorization": "Basic dXNlcjo="}, connect.CodeNotFound},
		{"bearer", map[string]string{"Authorization": "Bearer s3cret"}, connect.CodeNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e.header = map[string][]string{}
			for k, v := range tc.hdr {
				e.header.Set(k, v)
			}
			_, err := e.fs.Stat(t.Context(), connect.NewRequest(&fspb.StatRequest{Path: "/nope"}))
			wantCode(t, "unary", err, tc.want)
			s, err := e.proc.Connect(t.Context(), connect.NewRequest(&pb.ConnectRequest{Process: pidSel(1 << 30)}))
			if err == nil {
				_, err = collect(t, s)
			}
			wantCode(t, "server stream", err, tc.want)
		})
	}
}

func TestHTTPEndpointsAuth(t *testing.T) {
	e := newEnv(t, withToken)
	e.write("f.txt", "content")
	q := func(path, op, user string, exp int64) string {
		v := url.Values{"path": {path}, "signature": {sign(path, op, user, "s3cret", exp)}}
		if user != "" {
			v.Set("username", user)
		}
		if exp != 0 {
			v.Set("signature_expiration", strconv.FormatInt(exp, 10))
		}
		return v.Encode()
	}
	tests := []struct {
		name, method, target string
		hdr                  []string
		status               int
	}{
		{"health is public", "GET", "/health", nil, 204},
		{"download without token", "GET", "/files?path=f.txt", nil, 401},
		{"download with token", "GET", "/files?path=f.txt", []string{"X-Access-Token", "s3cret"}, 200},
		{"download signed", "GET", "/files?" + q("f.txt", "read", "", 0), nil, 200},
		{"download signed with user", "GET", "/files?" + q("f.txt", "read", "user", 0), nil, 200},
		{"download signed, not expired", "GET", "/files?" + q("f.txt", "read", "", fixedNow.Unix()+60), nil, 200},
		{"download signed, expired", "GET", "/files?" + q("f.txt", "read", "", fixedNow.Unix()-1), nil, 401},
		{"download signed for writing", "GET", "/files?" + q("f.txt", "write", "", 0), nil, 401},
		{"download signed for another path", "GET", "/files?" + strings.Replace(q("f.txt", "read", "", 0), "f.txt", "g.txt", 1), nil, 401},
		{"download with a bad expiration", "GET", "/files?path=f.txt&signature=v1_x&signature_expiration=soon", nil, 401},
		{"upload signed for reading", "POST", "/files?" + q("new.txt", "read", "", 0), nil, 401},
		{"init without token", "POST", "/init", nil, 401},
		{"envs without token", "GET", "/envs", nil, 401},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if status, b := e.do(tc.method, tc.target, nil, tc.hdr...); status != tc.status {
				t.Errorf("%d %s, want %d", status, b, tc.status)
			}
		})
	}
	status, b := e.do("POST", "/files?"+q("new.txt", "write", "", 0), strings.NewReader("signed upload"), "Content-Type", "application/octet-stream")
	if status != 200 {
		t.Fatalf("signed upload: %d %s", status, b)
	}
}

func TestInitSetsCommandEnvironment(t *testing.T) {
	e := newEnv(t, withToken)
	e.header.Set("X-Access-Token", "s3cret")
	tok := []string{"X-Access-Token", "s3cret"}
	for _, tc := range []struct {
		name, body string
		status     int
	}{
		{"malformed JSON", `{"envVars":`, 400},
		{"wrong type", `{"envVars": ["A=B"]}`, 400},
		{"bad variable name", `{"envVars": {"A=B": "x"}}`, 400},
		{"another access token", `{"accessToken": "other"}`, 409},
		{"huge body", `{"envVars": {"A": "` + strings.Repeat("x", 2<<20) + `"}}`, 400},
		{"env vars and the same token", `{"envVars": {"FROM_INIT": "yes", "OVERRIDDEN": "init"}, "accessToken": "s3cret", "timestamp": "2026-01-01T00:00:00Z"}`, 204},
	} {
		if status, b := e.do("POST", "/init", strings.NewReader(tc.body), append(tok, "Content-Type", "application/json")...); status != tc.status {
			t.Errorf("%s: %d %s, want %d", tc.name, status, b, tc.status)
		}
	}
	if status, b := e.do("GET", "/envs", nil, tok...); status != 200 || !strings.Contains(string(b), `"FROM_INIT":"yes"`) {
		t.Errorf("envs: %d %s, want FROM_INIT", status, b)
	}
	s, err := e.proc.Start(t.Context(), connect.NewRequest(&pb.StartRequest{Process: &pb.ProcessConfig{
		Cmd: "/bin/sh", Args: []string{"-c", `echo "$FROM_INIT $OVERRIDDEN"`}, Envs: map[string]string{"OVERRIDDEN": "request"}}}))
	if err != nil {
		t.Fatal(err)
	}
	r, err := collect(t, s)
	if err != nil || r.stdout != "yes request\n" {
		t.Fatalf("stdout %q err %v, want /init's variable, overridden by the request's", r.stdout, err)
	}
}

func TestHugeRPCMessageRefused(t *testing.T) {
	e := newEnv(t)
	big := strings.Repeat("x", 17<<20)
	_, err := e.fs.Stat(t.Context(), connect.NewRequest(&fspb.StatRequest{Path: big}))
	wantCode(t, "a 17 MiB message", err, connect.CodeResourceExhausted)
}
