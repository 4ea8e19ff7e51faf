package main

import (
	"maps"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestParseLabels(t *testing.T) {
	cases := []struct {
		in      string
		want    map[string]string
		wantErr bool
	}{
		{in: "app=sandbox-router", want: map[string]string{"app": "sandbox-router"}},
		{in: " app=r , tier=edge ", want: map[string]string{"app": "r", "tier": "edge"}},
		{in: "example.com/role=router", want: map[string]string{"example.com/role": "router"}},
		{in: "", wantErr: true},
		{in: "app", wantErr: true},
		{in: "app=", want: map[string]string{"app": ""}},
		{in: "-bad-=x", wantErr: true},
		{in: "app=not a value", wantErr: true},
	}
	for _, tc := range cases {
		got, err := parseLabels(tc.in)
		if tc.wantErr {
			if err == nil {
				t.Errorf("parseLabels(%q) = %v, want an error", tc.in, got)
			}
			continue
		}
		if err != nil || !maps.Equal(got, tc.want) {
			t.Errorf("parseLabels(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}
