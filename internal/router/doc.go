// Package router is sandbox-router's server: it routes each request, by its X-Sandbox-*
// headers, to the pod of one Sandbox, and to nothing else.
//
// A request passes, in order: the guard (guard.go: authentication 401/503, then the routing
// headers 400, then authorization 403, decided by package access), the proxy (proxy.go: the
// Sandbox resolved from a watch cache of slim Sandboxes (cache.go, fed through package watch)
// to its pod's address, the routing rules, a paused Sandbox woken on request (wake.go)), and a
// reverse proxy over HTTP/1.1 or h2c. The router dials only addresses its own cache holds:
// nothing a caller writes (Host, X-Sandbox-Pod-IP, the request target) picks the address, and
// the caller's Authorization header never reaches the sandbox. Options and Run (options.go,
// server.go) turn the flags into that stack, its metrics and probe port, and its shutdown.
package router
