package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/logging"
	"github.com/agent-sandbox/agent-sandbox/internal/logging/kubelog"
	"github.com/agent-sandbox/agent-sandbox/internal/manager"
	"github.com/agent-sandbox/agent-sandbox/internal/testenv"
)

// Config is one benchmark run.
type Config struct {
	Scenario    string
	Rate        float64       // claims per second
	Duration    time.Duration // how long claims are sent
	Pool        int           // warm pool size (0: every claim is cold)
	Nodes       int           // simulated nodes
	DeleteAfter time.Duration // churn: delete each claim this long after it is ready (0: keep)
	ClaimEnv    int           // env variables each claim carries (warm-env: served warm through sandboxd)
	Settle      time.Duration // how long to wait for the last claims
	Dir         string        // logs, audit log, profile; a temp dir when empty
	Profile     bool          // record a CPU profile of the controller during the burst
	// ControllerMemoryLimit is the controller's GOMEMLIMIT (as a container memory limit would
	// set it, cmd/controller); empty: none.
	ControllerMemoryLimit string
	RepoRoot              string
}

// queueSampleInterval is how often the work queues' depths are read during a burst; each read
// is a scrape of the controller's /metrics, which costs it CPU (its collectors list every
// Sandbox), so not more often than a deep queue needs to be seen.
const queueSampleInterval = time.Second

const (
	namespace = "bench"
	template  = "bench"
	poolName  = "bench"
)

// Run starts the control plane, the controller and the pool, fires the claims and reports.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	quietLibraryLogs()
	if cfg.Dir == "" {
		dir, err := os.MkdirTemp("", "bench-claims-")
		if err != nil {
			return nil, err
		}
		cfg.Dir = dir
	}
	auditPath := filepath.Join(cfg.Dir, "audit.log")
	logf("starting etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok with %d nodes (logs in %s)", cfg.Nodes, cfg.Dir)
	bc, err := startBenchCluster(ctx, testenv.Options{ControllerManager: true, Scheduler: true, KwokNodes: cfg.Nodes,
		AuditLogPath: auditPath, DataDir: cfg.Dir}, cfg.RepoRoot, cfg.ControllerMemoryLimit)
	if err != nil {
		return nil, err
	}
	defer bc.stop()
	env, ctrlProc, c, cc := bc.env, bc.ctrl, bc.c, bc.cc
	report := &Report{Scenario: cfg.Scenario, Rate: cfg.Rate, Duration: cfg.Duration.String(), Pool: cfg.Pool, Nodes: cfg.Nodes,
		ClaimEnv: cfg.ClaimEnv, WritesPerClaim: map[string]float64{}}
	if err := prepareLoad(ctx, c, ctrlProc, cfg.Pool, report); err != nil {
		return nil, err
	}

	rec, stopCache, err := recordClaims(ctx, cc)
	if err != nil {
		return nil, err
	}
	defer stopCache()
	if err := burst(ctx, cfg, env, c, ctrlProc, rec, report); err != nil {
		return nil, err
	}
	return report, nil
}

// prepareLoad creates the namespace and the template and, with a pool, fills it, measuring
// what the fill cost each process.
func prepareLoad(ctx context.Context, c client.Client, ctrlProc *controllerProc, pool int, report *Report) error {
	if err := createNamespaceAndTemplate(ctx, c); err != nil {
		return err
	}
	if pool == 0 {
		return nil
	}
	before := sampleCPU(ctrlProc)
	fill, err := fillPool(ctx, c, pool)
	if err != nil {
		return err
	}
	report.FillCPU = sampleCPU(ctrlProc).since(before, fill, pool)
	report.PoolFill = fill.Round(time.Millisecond).String()
	logf("pool of %d ready in %s", pool, report.PoolFill)
	return nil
}

// burst fires the claims, waits until they have pod IPs (or cfg.Settle passed) and reports
// latencies, CPU and memory used meanwhile, and the writes counted in the audit log.
func burst(ctx context.Context, cfg Config, env *testenv.Env, c client.Client, ctrlProc *controllerProc, rec *recorder, report *Report) error {
	n := int(cfg.Rate * cfg.Duration.Seconds())
	rec.expect(n)
	before, machineBefore := sampleCPU(ctrlProc), sampleMachine()
	reconcilesBefore, rerr := ctrlProc.reconciles()
	stopQueues := make(chan struct{})
	deepest := ctrlProc.watchQueues(queueSampleInterval, stopQueues)
	start := time.Now()
	profileDone := make(chan error, 2)
	if cfg.Profile {
		seconds := cfg.Duration + 2*time.Second
		go func() { profileDone <- ctrlProc.profile(ctx, seconds, filepath.Join(cfg.Dir, "controller-cpu.pprof")) }()
		go func() {
			profileDone <- apiServerProfile(ctx, env, seconds, filepath.Join(cfg.Dir, "apiserver-cpu.pprof"))
		}()
	}
	logf("firing %d claims at %.0f/s", n, cfg.Rate)
	if cfg.DeleteAfter > 0 {
		go churn(ctx, c, rec, cfg.DeleteAfter, rec.done)
	}
	sendTime := fire(ctx, c, namespace, template, n, cfg.Rate, "claim", claimEnv(cfg.ClaimEnv), rec)
	select {
	case <-rec.done:
	case <-time.After(cfg.Settle):
		report.Errors = append(report.Errors, fmt.Sprintf("not every claim got pod IPs within %s of the last send", cfg.Settle))
	case <-ctx.Done():
		return ctx.Err()
	}
	end := time.Now()
	after, machineAfter := sampleCPU(ctrlProc), sampleMachine()
	close(stopQueues)
	report.MaxQueueDepth = <-deepest
	report.ControllerRSSMB, _ = rssMiB(ctrlProc.pid())
	if cfg.Profile {
		if err := ctrlProc.heapProfile(ctx, filepath.Join(cfg.Dir, "controller-heap.pprof")); err != nil {
			report.Errors = append(report.Errors, "heap profile: "+err.Error())
		}
	}
	report.Claims = n
	report.AchievedRate = float64(n) / sendTime.Seconds()
	adopted := summarizeClaims(rec, report)
	report.CPU = after.since(before, end.Sub(start), report.Completed)
	report.Machine = machineAfter.since(machineBefore, end.Sub(start), report.CPU)
	report.ReconcilesPerClaim, rerr = reconcilesPerClaim(ctrlProc, reconcilesBefore, rerr, report.Completed)
	if rerr != nil {
		report.Errors = append(report.Errors, "reconcile counts: "+rerr.Error())
	}

	// Let the audit log's batch flush, then count writes made during the run.
	time.Sleep(2 * time.Second)
	if err := countWrites(filepath.Join(cfg.Dir, "audit.log"), start, end, adopted, report); err != nil {
		report.Errors = append(report.Errors, "audit log: "+err.Error())
	}
	if cfg.Profile {
		for range 2 {
			if err := <-profileDone; err != nil {
				report.Errors = append(report.Errors, "profile: "+err.Error())
			}
		}
	}
	return nil
}

// reconcilesPerClaim is how many reconciles each controller ran per completed claim since
// before (read when the burst began, with its error).
func reconcilesPerClaim(p *controllerProc, before map[string]float64, err error, claims int) (map[string]float64, error) {
	if err != nil || claims == 0 {
		return nil, err
	}
	after, err := p.reconciles()
	if err != nil {
		return nil, err
	}
	per := map[string]float64{}
	for name, n := range after {
		per[name] = (n - before[name]) / float64(claims)
	}
	return per, nil
}

// summarizeClaims fills latency and warm-hit figures; it returns the adopted Sandboxes' names.
func summarizeClaims(rec *recorder, r *Report) map[string]bool {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var toIPs, toReady []time.Duration
	adopted := map[string]bool{}
	for name, c := range rec.claims {
		if c.err != nil {
			r.Errors = append(r.Errors, fmt.Sprintf("create %s: %v", name, c.err))
			continue
		}
		if c.sent.IsZero() || c.podIPs.IsZero() {
			continue
		}
		r.Completed++
		toIPs = append(toIPs, c.podIPs.Sub(c.sent))
		if !c.ready.IsZero() {
			toReady = append(toReady, c.ready.Sub(c.sent))
		}
		if c.sandbox != name {
			r.Warm++
			adopted[c.sandbox] = true
		}
	}
	r.PodIPs, r.Ready = summarize(toIPs), summarize(toReady)
	if r.Completed > 0 {
		r.WarmHitRatio = float64(r.Warm) / float64(r.Completed)
	}
	if len(r.Errors) > 10 {
		r.Errors = append(r.Errors[:10], fmt.Sprintf("… and %d more", len(r.Errors)-10))
	}
	return adopted
}

// countWrites attributes every write in the run's window to its client, and splits the
// controller's into the claims' hot path (claims, adopted Sandboxes and their pods) and refill.
func countWrites(path string, from, to time.Time, adopted map[string]bool, r *Report) error {
	events, err := readAudit(path, from, to)
	if err != nil {
		return err
	}
	if r.Completed == 0 {
		return errors.New("no completed claims")
	}
	byUser := map[string]int{}
	hot, refill := 0, 0
	for _, e := range events {
		if e.ObjectRef.Namespace != namespace && e.ObjectRef.Resource != "bindings" {
			continue
		}
		user := strings.TrimPrefix(e.User.Username, "system:")
		byUser[user]++
		if e.User.Username != "agent-sandbox-controller" {
			continue
		}
		switch ref := e.ObjectRef; {
		case ref.Resource == "sandboxclaims", adopted[ref.Name] && (ref.Resource == "sandboxes" || ref.Resource == "pods"):
			hot++
		default:
			refill++
		}
	}
	for u, n := range byUser {
		r.WritesPerClaim[u] = float64(n) / float64(r.Completed)
	}
	if r.Warm > 0 {
		r.HotPathWrites = float64(hot) / float64(r.Warm)
	}
	r.RefillWrites = float64(refill) / float64(r.Completed)
	return nil
}

func loadgenClient(env *testenv.Env) (client.Client, cache.Cache, error) {
	path, err := env.Kubeconfig("loadgen")
	if err != nil {
		return nil, nil, err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, nil, err
	}
	cfg.QPS, cfg.Burst = 5000, 10000
	scheme, err := manager.NewScheme()
	if err != nil {
		return nil, nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, nil, err
	}
	cc, err := cache.New(cfg, cache.Options{Scheme: scheme, DefaultNamespaces: map[string]cache.Config{namespace: {}}})
	return c, cc, err
}

// createNamespaceAndTemplate makes the benchmark's namespace and the template its claims use.
// recordClaims starts the load generator's claim cache with the recorder watching it; stop
// ends the cache.
func recordClaims(ctx context.Context, cc cache.Cache) (rec *recorder, stop func(), err error) {
	rec = newRecorder()
	cacheCtx, stop := context.WithCancel(ctx)
	go func() { _ = cc.Start(cacheCtx) }()
	if err := watchClaims(ctx, cc, rec); err != nil {
		stop()
		return nil, nil, err
	}
	cc.WaitForCacheSync(ctx)
	return rec, stop, nil
}

func createNamespaceAndTemplate(ctx context.Context, c client.Client) error {
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
		return err
	}
	return c.Create(ctx, benchTemplate())
}

// benchTemplate runs sandboxd in container runtime and lets claims add env, so claims with env
// are served warm (the warm-env scenario); claims without env do not notice.
func benchTemplate() *extv1beta1.SandboxTemplate {
	return &extv1beta1.SandboxTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: template,
			Annotations: map[string]string{extv1beta1.SandboxdContainerAnnotation: "runtime"}},
		Spec: extv1beta1.SandboxTemplateSpec{EnvVarsInjectionPolicy: extv1beta1.EnvVarsInjectionPolicyAllowed,
			SandboxBlueprint: agentsv1beta1.SandboxBlueprint{PodTemplate: agentsv1beta1.PodTemplate{Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "runtime", Image: "agent-sandbox/runtime:bench", Ports: []corev1.ContainerPort{{ContainerPort: 8888}}}},
			}}}},
	}
}

func fillPool(ctx context.Context, c client.Client, size int) (time.Duration, error) {
	start := time.Now()
	pool := &extv1beta1.SandboxWarmPool{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: poolName},
		Spec:       extv1beta1.SandboxWarmPoolSpec{Replicas: new(int32(size)), TemplateRef: extv1beta1.SandboxTemplateRef{Name: template}},
	}
	if err := c.Create(ctx, pool); err != nil {
		return 0, err
	}
	deadline := start.Add(time.Duration(size)*200*time.Millisecond + 2*time.Minute)
	last := time.Now()
	for time.Now().Before(deadline) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(pool), pool); err != nil {
			return 0, err
		}
		if int(pool.Status.ReadyReplicas) >= size {
			return time.Since(start), nil
		}
		if time.Since(last) > 10*time.Second {
			logf("pool filling: %d/%d ready", pool.Status.ReadyReplicas, size)
			last = time.Now()
		}
		time.Sleep(250 * time.Millisecond)
	}
	return 0, fmt.Errorf("pool of %d not ready by the deadline (%d ready)%s", size, pool.Status.ReadyReplicas, podHint(ctx, c))
}

// churn deletes each claim DeleteAfter after it got pod IPs, so the pool refills under load,
// until stop is closed.
func churn(ctx context.Context, c client.Client, rec *recorder, after time.Duration, stop <-chan struct{}) {
	deleted := map[string]bool{}
	for ctx.Err() == nil {
		rec.mu.Lock()
		var due []string
		for name, t := range rec.claims {
			if !t.podIPs.IsZero() && !deleted[name] && time.Since(t.podIPs) >= after {
				due = append(due, name)
			}
		}
		rec.mu.Unlock()
		for _, name := range due {
			deleted[name] = true
			_ = c.Delete(ctx, &extv1beta1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}})
		}
		select {
		case <-ctx.Done():
		case <-stop:
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// quietLibraryLogs routes controller-runtime's and client-go's logs (the load generator's cache)
// to stderr at error level, instead of the "SetLogger was never called" warning and stack dump.
func quietLibraryLogs() {
	o := logging.NewOptions(logging.FormatText)
	_ = o.LevelFlag().Set("error")
	kubelog.Setup(o, os.Stderr)
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[bench %s] %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// podHint says why pods are not running, for a failed fill.
func podHint(ctx context.Context, c client.Client) string {
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods, client.InNamespace(namespace), client.Limit(1)); err != nil || len(pods.Items) == 0 {
		return "; no pods"
	}
	p := pods.Items[0]
	for _, cond := range p.Status.Conditions {
		if cond.Status != corev1.ConditionTrue {
			return fmt.Sprintf("; pod %s: %s=%s %s: %s", p.Name, cond.Type, cond.Status, cond.Reason, cond.Message)
		}
	}
	return fmt.Sprintf("; pod %s phase %s", p.Name, p.Status.Phase)
}

// claimEnv is n variables shaped like a session's (a key, a user id, a task id, ...).
func claimEnv(n int) []extv1beta1.EnvVar {
	env := make([]extv1beta1.EnvVar, n)
	for i := range env {
		env[i] = extv1beta1.EnvVar{Name: fmt.Sprintf("SESSION_VAR_%d", i), Value: fmt.Sprintf("value-%d-0123456789abcdef", i)}
	}
	return env
}
