// Package noredirect keeps the HTTP clients that talk to a sandbox, or to the router in front of
// sandboxes, from following redirects. A sandbox runs untrusted code: a 3xx from it pointing at
// another pod would make the router (which every Sandbox's NetworkPolicy admits) or the controller
// act on another tenant's sandbox, and Go resends the Authorization header to another port of the
// same host. The 3xx is the answer; nothing is fetched from its Location.
package noredirect

import "net/http"

// CheckRedirect is an http.Client's CheckRedirect that follows nothing: the client returns the
// 3xx response itself, body unread.
func CheckRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// Client returns a copy of c (an empty client when c is nil) that never follows a redirect.
// Transport, Jar and Timeout are kept.
func Client(c *http.Client) *http.Client {
	var out http.Client
	if c != nil {
		out = *c
	}
	out.CheckRedirect = CheckRedirect
	return &out
}
