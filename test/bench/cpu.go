package bench

import (
	"os"
	"time"
)

// measuredProcesses are the processes whose CPU a run reports: everything on the machine that
// works for the claims. The load generator is this process (its client, cache and recorder).
var measuredProcesses = []string{"kube-apiserver", "etcd", "controller", "kube-scheduler", "kwok", "kube-controller-manager", "loadgen"}

// cpuSample is the CPU time (seconds) each measured process has used so far.
type cpuSample map[string]float64

func sampleCPU(ctrlProc *controllerProc) cpuSample {
	s := cpuSample{}
	for _, name := range measuredProcesses {
		switch name {
		case "controller":
			s[name], _ = cpuSeconds(ctrlProc.pid())
		case "loadgen":
			s[name], _ = cpuSeconds(os.Getpid())
		default: // control-plane processes this one started
			s[name] = childCPUSeconds(name)
		}
	}
	return s
}

// ProcessCPU is what one process used during a run: cores on average, and CPU milliseconds per
// completed claim.
type ProcessCPU struct {
	Cores      float64 `json:"cores"`
	MsPerClaim float64 `json:"msPerClaim"`
}

// since is each process's use between before and s: cores over elapsed, and ms per claim (or per
// pool member, for a fill).
func (s cpuSample) since(before cpuSample, elapsed time.Duration, claims int) map[string]ProcessCPU {
	out := make(map[string]ProcessCPU, len(s))
	for name, secs := range s {
		used := secs - before[name]
		p := ProcessCPU{Cores: used / elapsed.Seconds()}
		if claims > 0 {
			p.MsPerClaim = 1000 * used / float64(claims)
		}
		out[name] = p
	}
	return out
}
