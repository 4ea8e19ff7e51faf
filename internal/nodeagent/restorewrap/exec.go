package restorewrap

import (
	"fmt"
	"os"
)

// execRunsc replaces this process with runsc and the same arguments: the shim cannot tell the
// wrapper was there.
func execRunsc(cfg Config, args []string) int {
	err := cfg.Exec(cfg.Runsc, append([]string{cfg.Runsc}, args...), os.Environ())
	fmt.Fprintf(cfg.Stderr, "runsc-restore: exec %s: %v\n", cfg.Runsc, err)
	return 127
}
