package spec

import (
	"fmt"
	"path/filepath"
)

// RunscOptions is the runsc shim's options file, as both the local cluster and the snapshot lab
// give it: runsc is binary (our restoring wrapper), its state under root, the shim's log at
// logLevel in logDir, and runsc's own debug log per container and command there too; platform
// systrap, and restore spec validation as a warning (a new pod's specs differ from the saved
// ones in gVisor annotations that name the pod). header, when set, is a comment line first.
func RunscOptions(header, binary, root, logLevel, logDir string) string {
	if header != "" {
		header = "# " + header + "\n"
	}
	return fmt.Sprintf(`%sbinary_name = %q
root = %q
log_level = %q
log_path = %q

[runsc_config]
  platform = "systrap"
  restore-spec-validation = "warning"
  debug-log = %q
`, header, binary, root, logLevel, logDir+"/", filepath.Join(logDir, "%ID%", "runsc.%COMMAND%.log"))
}
