package bench

import (
	"fmt"
	"io"
	"runtime"
	"time"

	"github.com/prometheus/procfs"
)

// The thresholds above which a run says the machine was not the bench's alone: another
// process's quarter of a core moves a 2-core machine's p99 visibly, and so does a hypervisor
// taking more than 2 % of the time.
const (
	outsideCoresWarning = 0.25
	stealShareWarning   = 0.02
)

// machineSample is the whole machine's CPU time so far (seconds, all CPUs): busy (every state
// but idle and iowait), stolen by the hypervisor, and the time some task waited for a CPU
// (/proc/pressure/cpu, "some"). ok is false where /proc/stat could not be read.
type machineSample struct {
	busy, steal, waited float64
	pressure, ok        bool
}

func sampleMachine() machineSample {
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return machineSample{}
	}
	st, err := fs.Stat()
	if err != nil {
		return machineSample{}
	}
	c := st.CPUTotal
	s := machineSample{busy: c.User + c.Nice + c.System + c.IRQ + c.SoftIRQ + c.Steal, steal: c.Steal, ok: true}
	if psi, err := fs.PSIStatsForResource("cpu"); err == nil && psi.Some != nil {
		s.waited, s.pressure = float64(psi.Some.Total)/1e6, true
	}
	return s
}

// Machine is what the whole machine did during a run, beside what the bench's own processes
// used, so that a run slowed by something else says so.
type Machine struct {
	CPUs int `json:"cpus"`
	// BusyCores is every process's CPU, on average; MeasuredCores the bench's own processes'.
	BusyCores     float64 `json:"busyCores"`
	MeasuredCores float64 `json:"measuredCores"`
	// OutsideCores is the rest: work outside the bench (another build, a test, the kernel's own).
	OutsideCores float64 `json:"outsideCores"`
	// StealShare is the share of the machine's time the hypervisor gave to other guests.
	StealShare float64 `json:"stealShare"`
	// CPUPressure is the share of the run during which some task waited for a CPU
	// (/proc/pressure/cpu "some"); -1 where the kernel has no pressure accounting.
	CPUPressure float64  `json:"cpuPressureSome"`
	Warnings    []string `json:"warnings,omitempty"`
}

// since is the machine's use between before and s, given what the measured processes used.
func (s machineSample) since(before machineSample, elapsed time.Duration, measured map[string]ProcessCPU) *Machine {
	if !s.ok || !before.ok || elapsed <= 0 {
		return nil
	}
	secs := elapsed.Seconds()
	m := &Machine{CPUs: runtime.NumCPU(), BusyCores: (s.busy - before.busy) / secs, CPUPressure: -1}
	for _, p := range measured {
		m.MeasuredCores += p.Cores
	}
	m.OutsideCores = max(0, m.BusyCores-m.MeasuredCores)
	m.StealShare = (s.steal - before.steal) / (secs * float64(m.CPUs))
	if s.pressure && before.pressure {
		m.CPUPressure = (s.waited - before.waited) / secs
	}
	if m.OutsideCores > outsideCoresWarning {
		m.Warnings = append(m.Warnings, fmt.Sprintf("%.2f cores went to work outside the bench: its figures are not this build's alone", m.OutsideCores))
	}
	if m.StealShare > stealShareWarning {
		m.Warnings = append(m.Warnings, fmt.Sprintf("the hypervisor took %.1f%% of the CPU time (steal)", 100*m.StealShare))
	}
	return m
}

// print writes the machine's rows and its warnings; a run without figures prints nothing.
func (m *Machine) print(w io.Writer) {
	if m == nil {
		return
	}
	pressure := "n/a"
	if m.CPUPressure >= 0 {
		pressure = fmt.Sprintf("%.0f%% of the time", 100*m.CPUPressure)
	}
	fmt.Fprintf(w, "machine (%d CPUs)\tbusy %.2f cores: bench %.2f, outside %.2f; steal %.1f%%; CPU pressure %s\n",
		m.CPUs, m.BusyCores, m.MeasuredCores, m.OutsideCores, 100*m.StealShare, pressure)
	for _, warning := range m.Warnings {
		fmt.Fprintf(w, "WARNING\t%s\n", warning)
	}
}
