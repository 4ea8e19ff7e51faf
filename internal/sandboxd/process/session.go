package process

import "context"

type sessionEnvKey struct{}

// WithSessionEnv returns ctx carrying the session's environment (the router's
// X-Sandbox-Session-Env: a warm claim's env), which BuildSpec layers between the daemon's
// environment and the request's own.
func WithSessionEnv(ctx context.Context, env map[string]string) context.Context {
	if len(env) == 0 {
		return ctx
	}
	return context.WithValue(ctx, sessionEnvKey{}, env)
}

// SessionEnv is the session's environment carried by ctx, nil when there is none.
func SessionEnv(ctx context.Context) map[string]string {
	env, _ := ctx.Value(sessionEnvKey{}).(map[string]string)
	return env
}
