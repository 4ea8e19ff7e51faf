package sdk

import (
	"io"
	"maps"
	"time"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
)

// CreateOption configures Create, GetOrCreate and CreateSandbox.
type CreateOption interface{ applyCreate(*createConfig) }

// WaitOption configures the calls that wait for a sandbox to be ready
// (Resume, WaitReady). OnResume hooks apply to Resume only.
type WaitOption interface{ applyWait(*waitConfig) }

// RunOption configures Run and Start.
type RunOption interface{ applyRun(*runConfig) }

type createConfig struct {
	waitConfig
	name, generateName    string
	labels, annotations   map[string]string
	env                   []extv1alpha1.EnvVar
	warmPool              *extv1alpha1.WarmPoolPolicy
	ttl                   time.Duration
	shutdownTime          *time.Time
	shutdownPolicy        extv1alpha1.ShutdownPolicy
	ttlAfterFinished      *int32
	podLabels, podAnnots  map[string]string
	noWait, keepOnFailure bool
	egress                *Egress // raw Sandboxes only
}

type createFunc func(*createConfig)

func (f createFunc) applyCreate(c *createConfig) { f(c) }

// WithName gives the claim an exact name instead of a generated one.
func WithName(name string) CreateOption { return createFunc(func(c *createConfig) { c.name = name }) }

// WithGenerateName sets the prefix of the generated claim name (default:
// the template name and a dash).
func WithGenerateName(prefix string) CreateOption {
	return createFunc(func(c *createConfig) { c.generateName = prefix })
}

// WithLabels adds labels to the claim; the controller copies them to the
// Sandbox, so `kubectl get sandboxes -l` finds them (multi-tenant queries).
func WithLabels(labels map[string]string) CreateOption {
	return createFunc(func(c *createConfig) { c.labels = mergeMap(c.labels, labels) })
}

// WithAnnotations adds annotations to the claim.
func WithAnnotations(annotations map[string]string) CreateOption {
	return createFunc(func(c *createConfig) { c.annotations = mergeMap(c.annotations, annotations) })
}

// WithIdleTimeout asks for the sandbox to pause itself after d (at least 10s) with no request
// through the router and no command running in it; volumes are kept, and the next request
// through the router resumes it (the agents.x-k8s.io/idle-timeout annotation; docs/idle.md).
func WithIdleTimeout(d time.Duration) CreateOption {
	return WithAnnotations(map[string]string{agentsv1alpha1.IdleTimeoutAnnotation: d.String()})
}

// WithEnvVars injects environment variables into the sandbox's containers
// (claim spec.env; the template's envVarsInjectionPolicy must allow it).
// An empty ContainerName means the first container.
func WithEnvVars(vars ...extv1alpha1.EnvVar) CreateOption {
	return createFunc(func(c *createConfig) { c.env = append(c.env, vars...) })
}

// WithWarmPool selects the warm pool policy: "none" (always a fresh
// sandbox), "default" (any pool of the template; the API default) or the
// name of one pool.
func WithWarmPool(policy string) CreateOption {
	return createFunc(func(c *createConfig) {
		p := extv1alpha1.WarmPoolPolicy(policy)
		c.warmPool = &p
	})
}

// WithTTL sets the claim's spec.lifecycle.shutdownTime to now+d; the
// controller shuts the sandbox down then, even if the client never comes
// back. Refresh it with KeepAlive.
func WithTTL(d time.Duration) CreateOption {
	return createFunc(func(c *createConfig) { c.ttl, c.shutdownTime = d, nil })
}

// WithShutdownTime sets the claim's spec.lifecycle.shutdownTime.
func WithShutdownTime(t time.Time) CreateOption {
	return createFunc(func(c *createConfig) { c.shutdownTime, c.ttl = &t, 0 })
}

// WithShutdownPolicy sets what happens at shutdownTime: Delete (the claim
// and everything under it), DeleteForeground, or Retain (the API default:
// the sandbox goes, the claim stays, marked expired).
func WithShutdownPolicy(p extv1alpha1.ShutdownPolicy) CreateOption {
	return createFunc(func(c *createConfig) { c.shutdownPolicy = p })
}

// WithTTLAfterFinished sets spec.lifecycle.ttlSecondsAfterFinished.
func WithTTLAfterFinished(d time.Duration) CreateOption {
	return createFunc(func(c *createConfig) {
		s := int32(d / time.Second)
		c.ttlAfterFinished = &s
	})
}

// WithPodLabels adds labels to the sandbox pod (spec.additionalPodMetadata).
func WithPodLabels(labels map[string]string) CreateOption {
	return createFunc(func(c *createConfig) { c.podLabels = mergeMap(c.podLabels, labels) })
}

// WithPodAnnotations adds annotations to the sandbox pod
// (spec.additionalPodMetadata).
func WithPodAnnotations(annotations map[string]string) CreateOption {
	return createFunc(func(c *createConfig) { c.podAnnots = mergeMap(c.podAnnots, annotations) })
}

// NoWait makes Create and GetOrCreate return as soon as the claim exists;
// call Sandbox.WaitReady before using it.
func NoWait() CreateOption { return createFunc(func(c *createConfig) { c.noWait = true }) }

// KeepOnFailure keeps a claim that Create made when waiting for it fails.
// By default the SDK deletes it, so that a timed-out Create leaves nothing
// behind.
func KeepOnFailure() CreateOption {
	return createFunc(func(c *createConfig) { c.keepOnFailure = true })
}

// EnvOption is returned by WithEnv; it works both as a CreateOption (claim
// spec.env, for every process of the sandbox) and as a RunOption (one
// command's environment).
type EnvOption map[string]string

// WithEnv sets environment variables: on Create, for the sandbox's first
// container (claim spec.env); on Run and Start, for that command only.
func WithEnv(env map[string]string) EnvOption { return EnvOption(maps.Clone(env)) }

func (e EnvOption) applyCreate(c *createConfig) {
	for _, k := range sortedKeys(e) {
		c.env = append(c.env, extv1alpha1.EnvVar{Name: k, Value: e[k]})
	}
}

func (e EnvOption) applyRun(c *runConfig) { c.env = mergeMap(c.env, e) }

// ReadyTimeoutOption is returned by WithReadyTimeout.
type ReadyTimeoutOption time.Duration

// WithReadyTimeout overrides Options.ReadyTimeout for one call.
func WithReadyTimeout(d time.Duration) ReadyTimeoutOption { return ReadyTimeoutOption(d) }

func (o ReadyTimeoutOption) applyCreate(c *createConfig) { c.timeout = time.Duration(o) }
func (o ReadyTimeoutOption) applyWait(c *waitConfig)     { c.timeout = time.Duration(o) }

// ProgressOption is returned by WithProgress.
type ProgressOption func(Progress)

// WithProgress calls f each time the awaited object changes (and once at
// the start), from the waiting goroutine.
func WithProgress(f func(Progress)) ProgressOption { return ProgressOption(f) }

func (o ProgressOption) applyCreate(c *createConfig) { c.progress = o }
func (o ProgressOption) applyWait(c *waitConfig)     { c.progress = o }

// ---- run options ----

// Command is what Run and Start execute: a shell script (Shell) or an
// argument vector (Argv).
type Command struct {
	shell string
	argv  []string
}

// Shell runs script through /bin/sh -c, so pipes, redirections, heredocs
// and variables work.
func Shell(script string) Command { return Command{shell: script} }

// Argv runs a program directly, without a shell; args[0] is looked up in
// PATH.
func Argv(args ...string) Command { return Command{argv: append([]string(nil), args...)} }

// String renders the command for messages.
func (c Command) String() string {
	if c.argv != nil {
		return shellJoin(c.argv)
	}
	return c.shell
}

// TTY asks for a pseudo-terminal (Run only; it implies the WebSocket
// exec). With a TTY, stderr is merged into stdout.
type TTY struct {
	Cols, Rows uint16
	// Resize, when set, delivers terminal size changes until it is closed
	// or the command ends.
	Resize <-chan TermSize
}

// TermSize is a terminal size.
type TermSize struct{ Cols, Rows uint16 }

type runConfig struct {
	env            map[string]string
	cwd            string
	timeout        time.Duration
	stdin          io.Reader
	stdout, stderr io.Writer
	maxOutput      int64
	tty            *TTY
}

type runFunc func(*runConfig)

func (f runFunc) applyRun(c *runConfig) { f(c) }

// WithCwd sets the working directory. With sandboxd it is relative to the
// sandbox root (/workspace); a leading "/" also means the root.
func WithCwd(dir string) RunOption { return runFunc(func(c *runConfig) { c.cwd = dir }) }

// WithTimeout bounds the command's run time; when it passes, the command's
// process group is killed and Result.TimedOut is set. Without it, Run's command
// may run until the context's deadline (every transport sends that as the
// timeout), or sandboxd's default (--exec-timeout, 300s) when the context has
// none; Start has no limit (the process outlives the call).
func WithTimeout(d time.Duration) RunOption { return runFunc(func(c *runConfig) { c.timeout = d }) }

// WithStdin feeds r to the command's standard input. In-memory readers
// (*bytes.Reader, *strings.Reader, *bytes.Buffer) up to 8 MiB travel with
// the request; any other reader is streamed over a WebSocket as it is read.
func WithStdin(r io.Reader) RunOption { return runFunc(func(c *runConfig) { c.stdin = r }) }

// WithStdout streams the command's standard output to w as it is produced
// (the Result's Stdout stays empty). Writes come from one goroutine.
func WithStdout(w io.Writer) RunOption { return runFunc(func(c *runConfig) { c.stdout = w }) }

// WithStderr streams the command's standard error to w as it is produced
// (the Result's Stderr stays empty).
func WithStderr(w io.Writer) RunOption { return runFunc(func(c *runConfig) { c.stderr = w }) }

// WithMaxOutput caps how many bytes of each of stdout and stderr the Result
// keeps; Result.Truncated tells when more was produced. Default: sandboxd's
// --max-output (64 MiB by default) for buffered runs, 64 MiB for streamed ones.
func WithMaxOutput(n int64) RunOption { return runFunc(func(c *runConfig) { c.maxOutput = n }) }

// WithTTY runs the command on a pseudo-terminal (Run only).
func WithTTY(t TTY) RunOption { return runFunc(func(c *runConfig) { c.tty = &t }) }

func mergeMap(dst, src map[string]string) map[string]string {
	if len(src) == 0 {
		return dst
	}
	if dst == nil {
		dst = make(map[string]string, len(src))
	}
	maps.Copy(dst, src)
	return dst
}
