package bench

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

func TestMachineSaysWhenTheRunWasNotTheBenchsAlone(t *testing.T) {
	before := machineSample{busy: 100, steal: 1, waited: 10, pressure: true, ok: true}
	measured := map[string]ProcessCPU{"kube-apiserver": {Cores: 1.2}, "controller": {Cores: 0.3}}
	cases := []struct {
		name         string
		after        machineSample
		wantOutside  float64
		wantPressure float64
		wantWarnings []string
	}{
		{"only the bench worked", machineSample{busy: 115, steal: 1, waited: 15, pressure: true, ok: true}, 0, 0.5, nil},
		{"another process took a core", machineSample{busy: 125, steal: 1, waited: 18, pressure: true, ok: true}, 1, 0.8,
			[]string{"1.00 cores went to work outside the bench"}},
		{"the hypervisor stole time", machineSample{busy: 115, steal: 3, waited: 15, pressure: true, ok: true}, 0, 0.5,
			[]string{"the hypervisor took"}},
		{"no pressure accounting", machineSample{busy: 115, steal: 1, ok: true}, 0, -1, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := tc.after.since(before, 10*time.Second, measured)
			if m == nil {
				t.Fatal("no figures, want the machine's")
			}
			if diff := m.OutsideCores - tc.wantOutside; diff > 1e-9 || diff < -1e-9 {
				t.Errorf("outside cores %.2f, want %.2f", m.OutsideCores, tc.wantOutside)
			}
			if diff := m.CPUPressure - tc.wantPressure; diff > 1e-9 || diff < -1e-9 {
				t.Errorf("CPU pressure %.2f, want %.2f", m.CPUPressure, tc.wantPressure)
			}
			if len(m.Warnings) != len(tc.wantWarnings) {
				t.Fatalf("warnings %q, want %d naming %q", m.Warnings, len(tc.wantWarnings), tc.wantWarnings)
			}
			for i, w := range tc.wantWarnings {
				if !strings.Contains(m.Warnings[i], w) {
					t.Errorf("warning %q, want one naming %q", m.Warnings[i], w)
				}
			}
		})
	}
}

func TestMachineWithoutProcStatGivesNoFigures(t *testing.T) {
	if m := (machineSample{}).since(machineSample{}, time.Second, nil); m != nil {
		t.Errorf("figures %+v from unread samples, want none", m)
	}
}

func TestByLabelSumsSamplesOfOneLabel(t *testing.T) {
	text := `# TYPE controller_runtime_reconcile_total counter
controller_runtime_reconcile_total{controller="sandbox",result="success"} 40
controller_runtime_reconcile_total{controller="sandbox",result="requeue"} 2
controller_runtime_reconcile_total{controller="sandboxclaim",result="success"} 10
# TYPE workqueue_depth gauge
workqueue_depth{name="sandbox"} 7
`
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	got := byLabel(fams["controller_runtime_reconcile_total"], "controller")
	if got["sandbox"] != 42 || got["sandboxclaim"] != 10 {
		t.Errorf("reconciles by controller %v, want sandbox 42 and sandboxclaim 10", got)
	}
	if d := byLabel(fams["workqueue_depth"], "name")["sandbox"]; d != 7 {
		t.Errorf("queue depth %v, want 7", d)
	}
}
