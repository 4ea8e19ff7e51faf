package wire

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
)

// HeaderSessionEnv carries the environment of a sandbox's session from the router to sandboxd:
// the variables of the SandboxClaim that took a warm Sandbox, which its pod was started without.
// sandboxd layers them under each request's own env for every process it starts. The router sets
// it from the Sandbox's agents.x-k8s.io/session-env annotation and drops any copy a client sends,
// so it holds only what the controller admitted under the template's envVarsInjectionPolicy.
const HeaderSessionEnv = "X-Sandbox-Session-Env"

// The value is the base64 (standard, padded) of a JSON object of variable names to values: one
// header line whatever the values hold (newlines, non-ASCII).

// ParseSessionEnv reads the JSON object of names to values that the annotation holds and checks
// every name and value as an environment entry.
func ParseSessionEnv(raw string) (map[string]string, error) {
	var env map[string]string
	if err := json.Unmarshal([]byte(raw), &env); err != nil {
		return nil, fmt.Errorf("want a JSON object of variable names to string values: %w", err)
	}
	if err := checkEnv(env); err != nil {
		return nil, err
	}
	return env, nil
}

// EncodeSessionEnv is the header value for env.
func EncodeSessionEnv(env map[string]string) (string, error) {
	if err := checkEnv(env); err != nil {
		return "", err
	}
	b, err := json.Marshal(env) // keys sorted: one value per env
	if err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(b), nil
}

// SessionEnvFromValues reads the header's values as a request carries them (HTTP header or gRPC
// metadata): none is no session env, more than one is refused (two hops could disagree).
func SessionEnvFromValues(vs []string) (map[string]string, error) {
	switch len(vs) {
	case 0:
		return nil, nil
	case 1:
		return DecodeSessionEnv(vs[0])
	}
	return nil, fmt.Errorf("%s sent %d times", HeaderSessionEnv, len(vs))
}

// DecodeSessionEnv reads a header value made by EncodeSessionEnv.
func DecodeSessionEnv(v string) (map[string]string, error) {
	b, err := base64.StdEncoding.DecodeString(v)
	if err != nil {
		return nil, fmt.Errorf("%s: not base64: %w", HeaderSessionEnv, err)
	}
	env, err := ParseSessionEnv(string(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", HeaderSessionEnv, err)
	}
	return env, nil
}

// checkEnv refuses what cannot be an environment entry: an empty name, "=" in a name, NUL
// anywhere.
func checkEnv(env map[string]string) error {
	for k, v := range env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return fmt.Errorf("invalid environment variable name %q", k)
		}
		if strings.IndexByte(v, 0) >= 0 {
			return fmt.Errorf("environment variable %s: the value holds a NUL byte", k)
		}
	}
	return nil
}
