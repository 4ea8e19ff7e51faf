package wire

import (
	"reflect"
	"strings"
	"testing"
)

func TestSessionEnvRoundTripsThroughTheHeader(t *testing.T) {
	tests := map[string]map[string]string{
		"plain":              {"API_KEY": "k-1", "USER_ID": "42"},
		"newlines and UTF-8": {"NOTE": "line 1\nline 2", "NAME": "Zoë"},
		"an empty value":     {"EMPTY": ""},
	}
	for name, env := range tests {
		t.Run(name, func(t *testing.T) {
			v, err := EncodeSessionEnv(env)
			if err != nil {
				t.Fatalf("EncodeSessionEnv(%v): %v", env, err)
			}
			if strings.ContainsAny(v, "\r\n") {
				t.Fatalf("header value %q spans lines", v)
			}
			got, err := DecodeSessionEnv(v)
			if err != nil || !reflect.DeepEqual(got, env) {
				t.Fatalf("DecodeSessionEnv(EncodeSessionEnv(%v)) = %v, %v; want the same map back", env, got, err)
			}
		})
	}
}

func TestSessionEnvRefusesWhatIsNoEnvironment(t *testing.T) {
	tests := []struct {
		name, annotation, wantErr string
	}{
		{"not JSON", `API_KEY=1`, "want a JSON object"},
		{"a list, not an object", `["A"]`, "want a JSON object"},
		{"a number value", `{"A":1}`, "want a JSON object"},
		{"an empty name", `{"":"x"}`, `invalid environment variable name ""`},
		{"= in a name", `{"A=B":"x"}`, `invalid environment variable name "A=B"`},
		{"NUL in a value", `{"A":"x\u0000y"}`, "NUL"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseSessionEnv(tc.annotation)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("ParseSessionEnv(%s) = %v; want an error containing %q", tc.annotation, err, tc.wantErr)
			}
		})
	}
	if _, err := DecodeSessionEnv("%%%"); err == nil || !strings.Contains(err.Error(), HeaderSessionEnv+": not base64") {
		t.Fatalf("DecodeSessionEnv(%%%%%%) = %v; want a not-base64 error naming the header", err)
	}
}
