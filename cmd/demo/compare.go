package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1alpha1"
	"github.com/agent-sandbox/agent-sandbox/pkg/sdk"
)

// The runtime comparison: the same template on the installation's default runtime class for
// templates (gVisor on the local cluster) and on the node's own runtime (runc), measured step
// by step in alternation, so that both see the same machine load.

const (
	runcTemplate = templateName + "-runc"
	runcPool     = poolName + "-runc"
	// execSamples is how many commands make one exec round trip figure (their median).
	execSamples = 10
	fileSize    = 10 << 20
)

// comparedSteps are the measured steps, in the order they run.
var comparedSteps = []string{
	"warm claim -> ready", "first command via router", "exec round trip", "10 MiB write + read",
	"cold claim -> ready", "pause -> resume -> routed",
}

// runtimeUnderTest is one column of the comparison.
type runtimeUnderTest struct {
	template, pool string
	name           string // the pods' runtime class, as measured ("runc" for the node's default)
	took           map[string][]time.Duration
}

// setupRuncTemplate applies the demo's template on the node's default runtime (an empty
// runtimeClassName opts out of the installation's default) and a one-member pool for it.
func (d *demo) setupRuncTemplate(ctx context.Context) error {
	tmpl := &extv1alpha1.SandboxTemplate{ObjectMeta: metav1.ObjectMeta{Name: runcTemplate, Namespace: demoNS}}
	if err := upsert(ctx, d.kube, tmpl, func() {
		tmpl.Spec = templateSpec()
		tmpl.Spec.PodTemplate.Spec.RuntimeClassName = ptr.To("")
		metav1.SetMetaDataAnnotation(&tmpl.ObjectMeta, extv1alpha1.SandboxdContainerAnnotation, "runtime")
	}); err != nil {
		return err
	}
	pool := &extv1alpha1.SandboxWarmPool{ObjectMeta: metav1.ObjectMeta{Name: runcPool, Namespace: demoNS}}
	return upsert(ctx, d.kube, pool, func() {
		pool.Spec.Replicas = 1
		pool.Spec.TemplateRef = extv1alpha1.SandboxTemplateRef{Name: runcTemplate}
	})
}

// compareRuntimes runs the measured steps rounds times on each runtime, alternating, and
// prints the medians side by side.
func (d *demo) compareRuntimes(ctx context.Context, rounds int) error {
	if err := d.setupRuncTemplate(ctx); err != nil {
		return err
	}
	runtimes := []*runtimeUnderTest{
		{template: templateName, pool: poolName, took: map[string][]time.Duration{}},
		{template: runcTemplate, pool: runcPool, took: map[string][]time.Duration{}},
	}
	d.say("comparing runtimes: %d round(s) of %d steps on each, alternated", rounds, len(comparedSteps))
	for round := 1; round <= rounds; round++ {
		for _, rt := range runtimes {
			if err := d.measureRound(ctx, rt); err != nil {
				return fmt.Errorf("round %d on template %s: %w", round, rt.template, err)
			}
		}
		d.say("round %d/%d done", round, rounds)
	}
	printComparison(d.out, rounds, runtimes)
	return nil
}

// measureRound runs every compared step once on rt's template.
func (d *demo) measureRound(ctx context.Context, rt *runtimeUnderTest) error {
	record := func(step string, took time.Duration) { rt.took[step] = append(rt.took[step], took) }
	// The pool refills between rounds; waiting for it is not part of a warm claim.
	if err := waitPoolFull(ctx, d.kube, rt.pool); err != nil {
		return err
	}
	start := time.Now()
	warm, err := d.cli.Create(ctx, rt.template, sdk.WithWarmPool(rt.pool))
	if err != nil {
		return err
	}
	defer func() { _ = warm.Delete(context.WithoutCancel(ctx)) }()
	record("warm claim -> ready", time.Since(start))
	if rt.name == "" {
		rt.name = d.runtimeClassOf(ctx, warm)
	}
	start = time.Now()
	if err := untilRouted(ctx, warm); err != nil {
		return err
	}
	record("first command via router", time.Since(start))
	rtt, err := execRoundTrip(ctx, warm)
	if err != nil {
		return err
	}
	record("exec round trip", rtt)
	took, err := writeAndRead(ctx, warm)
	if err != nil {
		return err
	}
	record("10 MiB write + read", took)

	start = time.Now()
	cold, err := d.cli.Create(ctx, rt.template, sdk.WithWarmPool("none"))
	if err != nil {
		return err
	}
	defer func() { _ = cold.Delete(context.WithoutCancel(ctx)) }()
	if err := untilRouted(ctx, cold); err != nil {
		return err
	}
	record("cold claim -> ready", time.Since(start))
	start = time.Now()
	if err := cold.Pause(ctx); err != nil {
		return err
	}
	if err := waitPaused(ctx, d.kube, cold.Namespace(), cold.SandboxName()); err != nil {
		return err
	}
	if err := cold.Resume(ctx); err != nil {
		return err
	}
	if err := untilRouted(ctx, cold); err != nil {
		return err
	}
	record("pause -> resume -> routed", time.Since(start))
	return nil
}

// runtimeClassOf names the runtime class of the sandbox's pod ("runc" for none).
func (d *demo) runtimeClassOf(ctx context.Context, sb *sdk.Sandbox) string {
	pod, err := podOf(ctx, d.kube, sb.Namespace(), sb.SandboxName())
	if err != nil {
		return "?"
	}
	return ptr.Deref(pod.Spec.RuntimeClassName, "runc")
}

// execRoundTrip is the median of execSamples trivial commands through the router.
func execRoundTrip(ctx context.Context, sb *sdk.Sandbox) (time.Duration, error) {
	samples := make([]time.Duration, 0, execSamples)
	for range execSamples {
		start := time.Now()
		res, err := sb.Run(ctx, sdk.Argv("true"))
		if err != nil {
			return 0, err
		}
		if err := res.Err(); err != nil {
			return 0, err
		}
		samples = append(samples, time.Since(start))
	}
	return median(samples), nil
}

// writeAndRead writes a 10 MiB file and reads it back, checking it arrived whole.
func writeAndRead(ctx context.Context, sb *sdk.Sandbox) (time.Duration, error) {
	data := bytes.Repeat([]byte("0123456789abcdef"), fileSize/16)
	start := time.Now()
	if err := sb.Files().Write(ctx, "compare/big.bin", data, 0); err != nil {
		return 0, err
	}
	got, err := sb.Files().Read(ctx, "compare/big.bin")
	if err != nil {
		return 0, err
	}
	took := time.Since(start)
	if !bytes.Equal(got, data) {
		return 0, fmt.Errorf("read back %d bytes that differ from the %d written", len(got), len(data))
	}
	return took, nil
}

func printComparison(out io.Writer, rounds int, runtimes []*runtimeUnderTest) {
	a, b := runtimes[0], runtimes[1]
	fmt.Fprintf(out, "\n%-28s %12s %12s %8s   (median of %d)\n", "STEP", a.name, b.name, "ratio", rounds)
	for _, step := range comparedSteps {
		ma, mb := median(a.took[step]), median(b.took[step])
		fmt.Fprintf(out, "%-28s %12s %12s %7.2fx\n", step, ma.Round(100*time.Microsecond), mb.Round(100*time.Microsecond), float64(ma)/float64(mb))
	}
}

func median(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// waitPoolFull waits until the named warm pool has all its replicas ready.
func waitPoolFull(ctx context.Context, c client.Client, name string) error {
	return waitPool(ctx, c, name, io.Discard)
}
