package step

import (
	"context"
	"errors"
	"slices"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// logged is a step that notes its calls in a shared log and fails where told.
type logged struct {
	name             string
	log              *[]string
	failUp, failDown bool
}

func (s logged) Name() string { return s.name }
func (s logged) Up(context.Context) error {
	*s.log = append(*s.log, "up "+s.name)
	if s.failUp {
		return errors.New("up failed")
	}
	return nil
}

func (s logged) Down(context.Context) error {
	*s.log = append(*s.log, "down "+s.name)
	if s.failDown {
		return errors.New("down failed")
	}
	return nil
}

func TestUpRunsInOrderAndStopsAtTheFirstFailure(t *testing.T) {
	var log []string
	steps := []Step{logged{name: "a", log: &log}, logged{name: "b", log: &log, failUp: true}, logged{name: "c", log: &log}}
	err := Up(t.Context(), steps)
	if err == nil || err.Error() != "b: up failed" {
		t.Errorf("Up = %v, want b's failure named", err)
	}
	if want := []string{"up a", "up b"}; !slices.Equal(log, want) {
		t.Errorf("ran %v, want %v", log, want)
	}
}

func TestDownRunsEveryStepInReverseOrderPastFailures(t *testing.T) {
	var log, warned []string
	steps := []Step{logged{name: "a", log: &log}, logged{name: "b", log: &log, failDown: true}, logged{name: "c", log: &log}}
	err := Down(t.Context(), steps, func(step string, _ error) { warned = append(warned, step) })
	if err == nil || err.Error() != "b: down failed" {
		t.Errorf("Down = %v, want b's failure named", err)
	}
	if want := []string{"down c", "down b", "down a"}; !slices.Equal(log, want) {
		t.Errorf("ran %v, want %v", log, want)
	}
	if !slices.Equal(warned, []string{"b"}) {
		t.Errorf("warned of %v, want [b]", warned)
	}
}

type record struct {
	Values map[string]string `json:"values"`
}

func TestStoreKeepsARecordAcrossProcesses(t *testing.T) {
	dir := t.TempDir()
	saved := record{Values: map[string]string{"net/ipv4/ip_forward": "0"}}
	if err := (Store{Dir: dir}).Save("sysctls", saved); err != nil {
		t.Fatal(err)
	}
	// A later process has only the directory.
	later := Store{Dir: dir}
	var got record
	ok, err := later.Load("sysctls", &got)
	if err != nil || !ok || got.Values["net/ipv4/ip_forward"] != "0" {
		t.Fatalf("Load = %v %v %+v, want the saved record", ok, err, got)
	}
	if later.Empty() {
		t.Error("a store with a record counts as empty")
	}
	if err := later.Remove("sysctls"); err != nil {
		t.Fatal(err)
	}
	if ok, err := later.Load("sysctls", &got); ok || err != nil {
		t.Errorf("Load after Remove = %v %v, want no record", ok, err)
	}
	if !later.Empty() {
		t.Error("a store without records does not count as empty")
	}
}

func TestStoreWithoutARecord(t *testing.T) {
	s := Store{Dir: t.TempDir() + "/never-made"}
	var got record
	if ok, err := s.Load("x", &got); ok || err != nil {
		t.Errorf("Load = %v %v, want no record and no error", ok, err)
	}
	if err := s.Remove("x"); err != nil {
		t.Errorf("Remove of nothing = %v, want nil", err)
	}
}
