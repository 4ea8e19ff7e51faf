// Package sdk is the Go client of agent-sandbox: it creates sandboxes on a
// Kubernetes cluster, waits until they are ready, and runs commands and
// moves files in them.
//
// A Client creates SandboxClaims of a SandboxTemplate (Create, GetOrCreate
// for session reuse by a deterministic name), or plain Sandboxes
// (CreateSandbox, GetOrCreateSandbox), and waits with a watch until the
// sandbox has a pod IP. It lists, deletes, pauses (replicas 0), resumes and
// keeps alive (shutdownTime) sandboxes, and validates the installation at
// startup (CheckCluster).
//
// A Sandbox handle works in one sandbox: Run a Shell script or an Argv with
// env, working directory, timeout, stdin and streamed output; Start
// background processes; read, write, list, upload, download and watch files
// through Files. It reaches the sandbox's sandboxd through the sandbox-router,
// directly at the pod IP, or through a port-forward; or, for images without
// sandboxd, through the Kubernetes exec API (see Mode).
//
//	c, err := sdk.New(sdk.Options{})
//	sb, err := c.GetOrCreate(ctx, "conv-"+id, "python")
//	res, err := sb.Run(ctx, sdk.Shell("python3 -c 'print(6*7)'"))
//	fmt.Print(res.Stdout) // 42
//	err = sb.Files().Write(ctx, "src/app/main.py", code, 0o644)
//	err = sb.Delete(ctx)
//
// Errors wrap ErrNotFound, ErrTimeout, ErrNotReady and the other sentinels
// (match with errors.Is); answers of sandboxd and the router are *APIError.
// The package sdktest provides a real sandboxd, router and a controller
// stand-in for tests of code that uses the SDK. docs/sdk.md walks through
// the flows of the integrations this SDK was built for.
package sdk
