package nodeagent

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	authnv1 "k8s.io/api/authentication/v1"

	"github.com/agent-sandbox/agent-sandbox/internal/nodeagent/imagestore"
)

const controllerUser = "system:serviceaccount:agent-sandbox-system:agent-sandbox-controller"

// reviewer knows two tokens: the controller's and a tenant's; "broken" fails the review.
type reviewer struct{}

func (reviewer) Review(_ context.Context, token string) (*authnv1.UserInfo, error) {
	switch token {
	case "controller":
		return &authnv1.UserInfo{Username: controllerUser}, nil
	case "tenant":
		return &authnv1.UserInfo{Username: "system:serviceaccount:team:default"}, nil
	case "broken":
		return nil, errors.New("TokenReview: connection refused")
	}
	return nil, nil
}

func TestOnlyTheControllerCallsTheAgent(t *testing.T) {
	a, _ := node(t, false, nil)
	srv := httptest.NewServer(Handler(a, reviewer{}, controllerUser))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	port, _ := strconv.Atoi(u.Port())
	for _, tc := range []struct {
		name, token string
		wantReason  string
	}{
		{name: "no token", wantReason: "Unauthenticated"},
		{name: "a token the API server does not know (or of another audience)", token: "stolen", wantReason: "Unauthenticated"},
		{name: "a tenant's token", token: "tenant", wantReason: "Forbidden"},
		{name: "the review fails", token: "broken", wantReason: "ReviewFailed"},
		{name: "the controller", token: "controller"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tokenFile := filepath.Join(t.TempDir(), "token")
			if err := os.WriteFile(tokenFile, []byte(tc.token+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			c := &Client{Port: port, TokenFile: tokenFile, HTTP: http.DefaultClient}
			res, err := c.Checkpoint(t.Context(), u.Hostname(), request)
			if tc.wantReason == "" {
				if err != nil || res.Bytes == 0 {
					t.Fatalf("Checkpoint = %+v, %v; want an image", res, err)
				}
				del, err := c.Delete(t.Context(), u.Hostname(), sandboxUID)
				if err != nil || del.Tried {
					t.Errorf("Delete = %+v, %v; want the image deleted, never restored", del, err)
				}
				return
			}
			if imagestore.ReasonOf(err) != tc.wantReason {
				t.Errorf("Checkpoint = %v; want refused with %s", err, tc.wantReason)
			}
			if uids, _ := a.Images.List(); len(uids) != 0 {
				t.Errorf("a refused call left images %v", uids)
			}
		})
	}
}

func TestTheClientCarriesTheAgentsReasons(t *testing.T) {
	a, _ := node(t, true, nil) // runc: not gVisor
	srv := httptest.NewServer(Handler(a, reviewer{}, controllerUser))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	port, _ := strconv.Atoi(u.Port())
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("controller"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := (&Client{Port: port, TokenFile: tokenFile, HTTP: http.DefaultClient}).Checkpoint(t.Context(), u.Hostname(), request)
	if imagestore.ReasonOf(err) != imagestore.ReasonNotGVisor {
		t.Errorf("Checkpoint of a runc pod = %v; want reason %s", err, imagestore.ReasonNotGVisor)
	}
}

// The controller's client takes a redirect for an answer: the place it points to gets nothing,
// least of all the controller's token.
func TestTheClientNeverFollowsARedirect(t *testing.T) {
	elsewhere := 0
	target := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { elsewhere++ }))
	defer target.Close()
	redirecting := httptest.NewServer(http.RedirectHandler(target.URL+DeletePath, http.StatusTemporaryRedirect))
	defer redirecting.Close()
	u, _ := url.Parse(redirecting.URL)
	port, _ := strconv.Atoi(u.Port())
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("controller"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := NewClient(port, tokenFile).Delete(t.Context(), u.Hostname(), "uid")
	if err == nil || elsewhere != 0 {
		t.Errorf("Delete through a 307: err %v, requests to its target %d; want an error and none", err, elsewhere)
	}
}

func TestMatchingASandboxsProcesses(t *testing.T) {
	for _, tc := range []struct {
		name   string
		argv   []string
		isShim bool
		want   bool
	}{
		{"its shim", []string{"/cache/containerd-shim-runsc-v1", "-namespace", "k8s.io", "-id", "abc", "-address", "/run/c.sock"}, true, true},
		{"another sandbox's shim at that pid", []string{"/cache/containerd-shim-runsc-v1", "-id", "abd"}, true, false},
		{"a process that is no shim at that pid", []string{"/bin/sleep", "-id", "abc"}, true, false},
		{"its runsc sandbox", []string{"runsc-sandbox", "--root=/r", "boot", "--bundle=/b", "abc"}, false, true},
		{"its gofer", []string{"runsc-gofer", "--root=/r", "gofer", "abc"}, false, true},
		{"another sandbox's runsc", []string{"runsc-sandbox", "--root=/r", "boot", "abcd"}, false, false},
		{"not runsc", []string{"/bin/sh", "abc"}, false, false},
	} {
		if got := matchesSandbox(tc.argv, "abc", tc.isShim); got != tc.want {
			t.Errorf("%s: %q matches %t; want %t", tc.name, tc.argv, got, tc.want)
		}
	}
}
