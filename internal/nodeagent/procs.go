package nodeagent

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// Processes ends what a failed restore left running.
type Processes interface {
	// KillSandbox kills the shim shimPID (when it serves sandboxID) and every runsc process of
	// sandboxID, and returns the pids killed.
	KillSandbox(sandboxID string, shimPID int) []int
}

// HostProcesses reads /proc (the agent runs in the host's pid namespace).
type HostProcesses struct{}

// KillSandbox implements Processes.
func (HostProcesses) KillSandbox(sandboxID string, shimPID int) []int {
	var killed []int
	for _, pid := range pidsOf(sandboxID, shimPID) {
		if syscall.Kill(pid, syscall.SIGKILL) == nil {
			killed = append(killed, pid)
		}
	}
	return killed
}

// pidsOf: the shim of the sandbox (its argv has -id <sandboxID>), and runsc, runsc-sandbox and
// runsc-gofer processes that name sandboxID as an argument.
func pidsOf(sandboxID string, shimPID int) []int {
	if sandboxID == "" {
		return nil
	}
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if matchesSandbox(strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00"), sandboxID, pid == shimPID) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// matchesSandbox: argv is the sandbox's shim (when isShim) or one of its runsc processes.
func matchesSandbox(argv []string, sandboxID string, isShim bool) bool {
	if len(argv) == 0 {
		return false
	}
	name := filepath.Base(argv[0])
	switch {
	case isShim:
		i := slices.Index(argv, "-id")
		return strings.HasPrefix(name, "containerd-shim-runsc") && i >= 0 && i+1 < len(argv) && argv[i+1] == sandboxID
	case strings.HasPrefix(name, "runsc"):
		return slices.Contains(argv[1:], sandboxID)
	}
	return false
}
