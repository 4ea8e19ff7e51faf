package router

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestParseRoute(t *testing.T) {
	long := strings.Repeat("a", 63)
	tests := []struct {
		name    string
		headers map[string][]string
		want    Route
		wantErr string
	}{
		{"defaults", map[string][]string{"X-Sandbox-Id": {"sb-1"}}, Route{"default", "sb-1", 8888}, ""},
		{"all set", map[string][]string{"X-Sandbox-Id": {"a"}, "X-Sandbox-Namespace": {"team-x"}, "X-Sandbox-Port": {"65535"}}, Route{"team-x", "a", 65535}, ""},
		{"63 chars", map[string][]string{"X-Sandbox-Id": {long}}, Route{"default", long, 8888}, ""},
		{"empty namespace and port take defaults", map[string][]string{"X-Sandbox-Id": {"a"}, "X-Sandbox-Namespace": {""}, "X-Sandbox-Port": {""}}, Route{"default", "a", 8888}, ""},
		{"missing id", map[string][]string{}, Route{}, msgIDRequired},
		{"empty id", map[string][]string{"X-Sandbox-Id": {""}}, Route{}, msgIDRequired},
		{"uppercase id", map[string][]string{"X-Sandbox-Id": {"Sb"}}, Route{}, msgInvalidID},
		{"64 chars", map[string][]string{"X-Sandbox-Id": {long + "a"}}, Route{}, msgInvalidID},
		{"leading dash", map[string][]string{"X-Sandbox-Id": {"-a"}}, Route{}, msgInvalidID},
		{"trailing dash", map[string][]string{"X-Sandbox-Id": {"a-"}}, Route{}, msgInvalidID},
		{"dot", map[string][]string{"X-Sandbox-Id": {"a.b"}}, Route{}, msgInvalidID},
		{"path chars", map[string][]string{"X-Sandbox-Id": {"../x"}}, Route{}, msgInvalidID},
		{"ip as id", map[string][]string{"X-Sandbox-Id": {"10.0.0.1"}}, Route{}, msgInvalidID},
		{"two ids", map[string][]string{"X-Sandbox-Id": {"a", "b"}}, Route{}, msgInvalidID},
		{"bad namespace", map[string][]string{"X-Sandbox-Id": {"a"}, "X-Sandbox-Namespace": {"Kube_System"}}, Route{}, msgInvalidNamespace},
		{"two namespaces", map[string][]string{"X-Sandbox-Id": {"a"}, "X-Sandbox-Namespace": {"a", "b"}}, Route{}, msgInvalidNamespace},
		{"port zero", map[string][]string{"X-Sandbox-Id": {"a"}, "X-Sandbox-Port": {"0"}}, Route{}, msgInvalidPort},
		{"port too big", map[string][]string{"X-Sandbox-Id": {"a"}, "X-Sandbox-Port": {"65536"}}, Route{}, msgInvalidPort},
		{"port signed", map[string][]string{"X-Sandbox-Id": {"a"}, "X-Sandbox-Port": {"+80"}}, Route{}, msgInvalidPort},
		{"port negative", map[string][]string{"X-Sandbox-Id": {"a"}, "X-Sandbox-Port": {"-1"}}, Route{}, msgInvalidPort},
		{"port word", map[string][]string{"X-Sandbox-Id": {"a"}, "X-Sandbox-Port": {"http"}}, Route{}, msgInvalidPort},
		{"port long", map[string][]string{"X-Sandbox-Id": {"a"}, "X-Sandbox-Port": {"000080"}}, Route{}, msgInvalidPort},
		{"two ports", map[string][]string{"X-Sandbox-Id": {"a"}, "X-Sandbox-Port": {"80", "81"}}, Route{}, msgInvalidPort},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseRoute(http.Header(tt.headers))
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("route = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func BenchmarkParseRoute(b *testing.B) {
	h := http.Header{"X-Sandbox-Id": {"sandbox-123"}, "X-Sandbox-Namespace": {"team"}, "X-Sandbox-Port": {"8888"}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseRoute(h); err != nil {
			b.Fatal(err)
		}
	}
}

func TestParseTimeout(t *testing.T) {
	const limit = 180 * time.Second
	tests := []struct {
		name    string
		values  []string
		want    time.Duration
		wantErr bool
	}{
		{"absent", nil, 0, false},
		{"empty", []string{""}, 0, false},
		{"integer seconds (Python client)", []string{"60"}, 60 * time.Second, false},
		{"float seconds (Go client)", []string{"59.5"}, 59500 * time.Millisecond, false},
		{"python float", []string{"60.0"}, 60 * time.Second, false},
		{"capped at the proxy timeout", []string{"600"}, limit, false},
		{"tiny is at least a millisecond", []string{"0.0000001"}, time.Millisecond, false},
		{"zero", []string{"0"}, 0, true},
		{"negative", []string{"-1"}, 0, true},
		{"not a number", []string{"soon"}, 0, true},
		{"NaN", []string{"NaN"}, 0, true},
		{"infinite", []string{"Inf"}, 0, true},
		{"sent twice", []string{"1", "2"}, 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			if tc.values != nil {
				h["X-Sandbox-Timeout"] = tc.values
			}
			got, err := ParseTimeout(h, limit)
			if tc.wantErr {
				if err == nil || err.Error() != msgInvalidTimeout {
					t.Fatalf("ParseTimeout(%q) = %v, %v; want error %q", tc.values, got, err, msgInvalidTimeout)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseTimeout(%q) = %v, %v; want %v", tc.values, got, err, tc.want)
			}
		})
	}
}
