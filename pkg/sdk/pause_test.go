package sdk

import "testing"

func TestAPauseSetsItsModeInTheSameWrite(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []PauseOption
		want string
	}{
		{"today's pause", nil, `{"spec":{"replicas":0}}`},
		{"keep memory", []PauseOption{KeepMemory}, `{"metadata":{"annotations":{"agents.x-k8s.io/pause-mode":"KeepMemory"}},"spec":{"replicas":0}}`},
		{"back to deleting", []PauseOption{KeepMemory, DeleteOnPause}, `{"metadata":{"annotations":{"agents.x-k8s.io/pause-mode":"Delete"}},"spec":{"replicas":0}}`},
	} {
		if got := string(pausePatch(tc.opts)); got != tc.want {
			t.Errorf("%s: patch %s; want %s", tc.name, got, tc.want)
		}
	}
}
