package bench

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// clockTicks is USER_HZ, 100 on Linux.
const clockTicks = 100

// cpuSeconds reads the user+system CPU time a process has used.
func cpuSeconds(pid int) (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the command name (which may hold spaces) start after the last ')'.
	rest := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	if len(rest) < 13 {
		return 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	utime, _ := strconv.ParseFloat(rest[11], 64)
	stime, _ := strconv.ParseFloat(rest[12], 64)
	return (utime + stime) / clockTicks, nil
}

// rssMiB reads a process's resident memory.
func rssMiB(pid int) (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			f := strings.Fields(line)
			kb, err := strconv.ParseFloat(f[1], 64)
			return kb / 1024, err
		}
	}
	return 0, fmt.Errorf("no VmRSS for pid %d", pid)
}

// childCPUSeconds sums the CPU time of this process's direct children whose executable is
// named name (the control-plane processes envtest and testenv started).
func childCPUSeconds(name string) float64 {
	entries, _ := os.ReadDir("/proc")
	total := 0.0
	me := strconv.Itoa(os.Getpid())
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil || !strings.Contains(string(status), "\nPPid:\t"+me+"\n") {
			continue
		}
		if !strings.HasPrefix(string(status), "Name:\t"+name[:min(len(name), 15)]+"\n") {
			continue
		}
		if cpu, err := cpuSeconds(pid); err == nil {
			total += cpu
		}
	}
	return total
}
