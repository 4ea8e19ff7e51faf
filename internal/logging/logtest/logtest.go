// Package logtest records what code logs through a logr.Logger, for tests that check which
// decisions are logged, at which verbosity, about which objects, and what never is.
package logtest

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// Line is one logged line.
type Line struct {
	// V is the verbosity of an info line (logr's V(n)); -1 for an error line.
	V   int
	Msg string
	// Values are the key/values, klog.ObjectRefs decoded as Ref makes them.
	Values map[string]any
}

// Recorder holds the lines a logger from New wrote.
type Recorder struct {
	mu    sync.Mutex
	lines []Line
	raw   []string
}

// New returns a logger writing every line up to verbosity v into the returned recorder.
func New(v int) (logr.Logger, *Recorder) {
	rec := &Recorder{}
	log := funcr.NewJSON(func(obj string) {
		var m map[string]any
		if err := json.Unmarshal([]byte(obj), &m); err != nil {
			m = map[string]any{"msg": obj}
		}
		line := Line{V: -1, Values: map[string]any{}}
		for k, val := range m {
			switch k {
			case "msg":
				line.Msg, _ = val.(string)
			case "level":
				if f, ok := val.(float64); ok {
					line.V = int(f)
				}
			case "logger", "caller", "ts":
			default:
				line.Values[k] = val
			}
		}
		rec.mu.Lock()
		defer rec.mu.Unlock()
		rec.lines = append(rec.lines, line)
		rec.raw = append(rec.raw, obj)
	}, funcr.Options{Verbosity: v})
	return log, rec
}

// Lines returns the lines written so far.
func (r *Recorder) Lines() []Line {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Line(nil), r.lines...)
}

// Find returns the first line with message msg.
func (r *Recorder) Find(msg string) (Line, bool) {
	for _, l := range r.Lines() {
		if l.Msg == msg {
			return l, true
		}
	}
	return Line{}, false
}

// Check returns nil when a line msg was logged at V(v) with every key/value of want (others
// may be there too), else an error that says what was logged instead.
func (r *Recorder) Check(v int, msg string, want map[string]any) error {
	line, ok := r.Find(msg)
	if !ok {
		return fmt.Errorf("no line %q at V(%d); logged %q", msg, v, r.Messages())
	}
	if line.V != v {
		return fmt.Errorf("%q logged at V(%d), want V(%d)", msg, line.V, v)
	}
	got := map[string]any{}
	for k := range want {
		got[k] = line.Values[k]
	}
	if d := cmp.Diff(want, got, cmpopts.EquateEmpty()); d != "" {
		return fmt.Errorf("%q values (-want +got):\n%s", msg, d)
	}
	return nil
}

// Messages lists the messages written, in order.
func (r *Recorder) Messages() []string {
	var out []string
	for _, l := range r.Lines() {
		out = append(out, l.Msg)
	}
	return out
}

// Text is every line as written (JSON, one a line), for checks that something never appears.
func (r *Recorder) Text() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.raw, "\n")
}

// Ref is how a klog.KObj or klog.KRef of namespace/name appears in Line.Values.
func Ref(namespace, name string) map[string]any {
	ref := map[string]any{"name": name}
	if namespace != "" {
		ref["namespace"] = namespace
	}
	return ref
}
