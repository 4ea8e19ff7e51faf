// Package testwrap is the one set of object builders and waits the tests share, so a test reads
// as the specification it checks:
//
//	tmpl := testwrap.MakeTemplate(ns, "python").Env("PRESET", "template").EnvInjection(extv1alpha1.EnvVarsInjectionPolicyAllowed).Obj()
//	claim := testwrap.MakeClaim(ns, "session-1").Template("python").WarmPool("none").Env("NEW", "1").Obj()
//	testwrap.Eventually(t, "the claim is Ready", func() error { ... })
//
// Every Make* starts from the smallest valid object: namespace and name, and for kinds with a
// pod template one container, RuntimeContainer. Each method sets one thing and returns the
// wrapper, so calls chain; Obj returns a deep copy, so one wrapper can stamp out several objects
// and a created object never aliases the wrapper. A test states everything it asserts on; it
// never relies on a default it does not see (a default may gain fields).
//
// Methods that touch a container act on the first one (the runtime container). The v1beta1
// variants (MakeSandboxV1beta1, MakeTemplateV1beta1, MakeClaimV1beta1) exist where tests speak
// v1beta1, as upstream's clients do.
//
// Eventually (and EventuallyContext, Consistently, and Wait for other timing) is the one poll
// loop: a check returns nil once the expected state is there, or an error saying what it sees
// instead; a timeout fails the test with what was expected and that last error.
//
// This is a test-only package (non-test so that every test package can import it); production
// code must not import it, which TestNoProductionImports enforces.
package testwrap
