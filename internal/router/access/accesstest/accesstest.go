// Package accesstest holds fakes of the authorities package access asks (who a token belongs
// to, whether a user may reach a Sandbox) and pods as the router's slim pod watch delivers them,
// for the tests of access and of the router's guard. Production code never imports it.
package accesstest

import (
	"context"
	"sync"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TokenReviewer knows the users of the tokens in Users (token -> username, each in the group
// system:authenticated), like the TokenReview API would; an error set with SetErr is returned
// instead.
type TokenReviewer struct {
	mu    sync.Mutex
	Users map[string]string
	err   error
	calls int
}

// Review implements access.TokenReviewer.
func (f *TokenReviewer) Review(_ context.Context, token string) (*authnv1.UserInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.err != nil {
		return nil, f.err
	}
	name, ok := f.Users[token]
	if !ok {
		return nil, nil
	}
	return &authnv1.UserInfo{Username: name, Groups: []string{"system:authenticated"}}, nil
}

// SetErr makes every later review fail with err (nil: answer again).
func (f *TokenReviewer) SetErr(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
}

// Forget revokes token: it belongs to no one from now on.
func (f *TokenReviewer) Forget(token string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.Users, token)
}

// Calls is the number of reviews asked.
func (f *TokenReviewer) Calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// SandboxReviewer allows the pairs in Grants ("user@namespace/name"), like RBAC would: a grant
// with no name ("user@namespace/") is on every Sandbox of the namespace.
type SandboxReviewer struct {
	mu     sync.Mutex
	Grants map[string]bool
	// Err, when set, is returned instead of an answer; ErrLeft, when above 0, that many times only.
	Err     error
	ErrLeft int
	calls   int
}

// Review implements access.SandboxReviewer.
func (f *SandboxReviewer) Review(_ context.Context, u authnv1.UserInfo, ns, name string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.Err != nil {
		err := f.Err
		if f.ErrLeft > 0 {
			if f.ErrLeft--; f.ErrLeft == 0 {
				f.Err = nil
			}
		}
		return false, err
	}
	return f.Grants[u.Username+"@"+ns+"/"+name] || f.Grants[u.Username+"@"+ns+"/"], nil
}

// SetErr makes every later review fail with err (nil: answer again).
func (f *SandboxReviewer) SetErr(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Err, f.ErrLeft = err, 0
}

// Revoke removes a grant ("user@namespace/name").
func (f *SandboxReviewer) Revoke(grant string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.Grants, grant)
}

// Calls is the number of reviews asked.
func (f *SandboxReviewer) Calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// Pod is a pod as the slim pod watch delivers it: phase "Running", "Pending", ...; ips are its
// status' pod IPs.
func Pod(ns, name, serviceAccount, phase string, hostNetwork bool, ips ...string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:   corev1.PodSpec{ServiceAccountName: serviceAccount, HostNetwork: hostNetwork},
		Status: corev1.PodStatus{Phase: corev1.PodPhase(phase)}}
	for _, ip := range ips {
		p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: ip})
	}
	return p
}

// Terminating marks p as being deleted.
func Terminating(p *corev1.Pod) *corev1.Pod {
	now := metav1.Now()
	p.DeletionTimestamp = &now
	return p
}
