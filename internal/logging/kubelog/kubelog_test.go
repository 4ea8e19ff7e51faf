package kubelog_test

import (
	"bytes"
	"flag"
	"io"
	"log/slog"
	"strings"
	"testing"

	"go.uber.org/goleak"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/agent-sandbox/agent-sandbox/internal/logging"
	"github.com/agent-sandbox/agent-sandbox/internal/logging/kubelog"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"))
}

// controller-runtime takes its logger once per process: only the first case, which runs first,
// can see its lines (the later ones check klog alone).
func TestKlogAndControllerRuntimeFollowTheVerbosity(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantSeen []string
		wantNot  []string
	}{
		{"-v=2", []string{"-v=2"}, []string{"klog info", "ctrl info", "klog v2", "ctrl v2", "klog ctx v2"}, []string{"klog v3", "ctrl v3"}},
		{"default", nil, []string{"klog info"}, []string{"klog v2", "klog ctx v2"}},
		{"--log-level=error", []string{"--log-level=error"}, []string{"klog error"}, []string{"klog info"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := logging.NewOptions(logging.FormatText)
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			o.BindFlags(fs)
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			kubelog.Setup(o, &buf)
			t.Cleanup(func() { slog.SetDefault(slog.New(slog.DiscardHandler)) })
			klog.InfoS("klog info")
			klog.ErrorS(nil, "klog error")
			klog.V(2).InfoS("klog v2")
			klog.V(3).InfoS("klog v3")
			klog.Background().V(2).Info("klog ctx v2")
			ctrllog.Log.Info("ctrl info")
			ctrllog.Log.V(2).Info("ctrl v2")
			ctrllog.Log.V(3).Info("ctrl v3")
			out := buf.String()
			for _, s := range tt.wantSeen {
				if !strings.Contains(out, `msg="`+s+`"`) {
					t.Errorf("%q not logged; got:\n%s", s, out)
				}
			}
			for _, s := range tt.wantNot {
				if strings.Contains(out, `msg="`+s+`"`) {
					t.Errorf("%q logged, want it filtered out; got:\n%s", s, out)
				}
			}
		})
	}
}
