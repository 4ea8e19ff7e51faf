package testenv

import (
	"os"
	"path/filepath"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// auditPolicy logs writes only, at Metadata level (who, verb, which object), once per request.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived", "ResponseStarted"]
rules:
- level: Metadata
  verbs: ["create", "update", "patch", "delete", "deletecollection"]
- level: None
`

func configureAudit(env *envtest.Environment, dir, logPath string) error {
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		return err
	}
	args := env.ControlPlane.GetAPIServer().Configure()
	args.Set("audit-policy-file", policy)
	args.Set("audit-log-path", logPath)
	args.Set("audit-log-format", "json")
	args.Set("audit-log-mode", "batch")
	args.Set("audit-log-batch-max-wait", "1s")
	// 0 is not "never rotate": the log library then rotates at 100 MB, and a long run's early
	// events would move to a backup file the benchmarks don't read. 1 TB is never reached.
	args.Set("audit-log-maxsize", "1000000")
	return nil
}
