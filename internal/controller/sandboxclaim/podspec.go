package sandboxclaim

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
	"github.com/agent-sandbox/agent-sandbox/internal/controller/podmeta"
)

// injectEnv applies the claim's env to the pod spec under the template's policy (checkEnv).
// Each variable targets containerName, or the first container.
func injectEnv(spec *corev1.PodSpec, policy extv1beta1.EnvVarsInjectionPolicy, env []extv1beta1.EnvVar) (*corev1.PodSpec, error) {
	if err := checkEnv(spec, policy, env); err != nil {
		return nil, err
	}
	for _, e := range env {
		c := findContainer(spec, e.ContainerName)
		if i := envIndex(c.Env, e.Name); i >= 0 {
			c.Env[i] = corev1.EnvVar{Name: e.Name, Value: e.Value}
		} else {
			c.Env = append(c.Env, corev1.EnvVar{Name: e.Name, Value: e.Value})
		}
	}
	return spec, nil
}

// checkEnv says whether the template's policy admits the claim's env, without changing spec
// (the template may be the cache's): Disallowed rejects any env, Allowed adds but never
// overrides, Overrides may replace.
func checkEnv(spec *corev1.PodSpec, policy extv1beta1.EnvVarsInjectionPolicy, env []extv1beta1.EnvVar) error {
	if len(env) == 0 {
		return nil
	}
	reject := func(format string, args ...any) error {
		return &userError{extv1beta1.ReasonEnvVarsInjectionRejected, fmt.Sprintf(format, args...)}
	}
	if policy == "" || policy == extv1beta1.EnvVarsInjectionPolicyDisallowed {
		return reject("the template's envVarsInjectionPolicy is Disallowed; remove spec.env or allow it on the template")
	}
	for _, e := range env {
		c := findContainer(spec, e.ContainerName)
		if c == nil {
			return reject("env %s targets container %q, which the template does not have", e.Name, e.ContainerName)
		}
		if envIndex(c.Env, e.Name) >= 0 && policy != extv1beta1.EnvVarsInjectionPolicyOverrides {
			return reject("env %s is already set by the template on container %q and the policy Allowed does not permit overriding it", e.Name, c.Name)
		}
	}
	return nil
}

func findContainer(spec *corev1.PodSpec, name string) *corev1.Container {
	if name == "" {
		if len(spec.Containers) == 0 {
			return nil
		}
		return &spec.Containers[0]
	}
	for i := range spec.Containers {
		if spec.Containers[i].Name == name {
			return &spec.Containers[i]
		}
	}
	for i := range spec.InitContainers {
		if spec.InitContainers[i].Name == name {
			return &spec.InitContainers[i]
		}
	}
	return nil
}

func envIndex(env []corev1.EnvVar, name string) int {
	for i := range env {
		if env[i].Name == name {
			return i
		}
	}
	return -1
}

// validatePodMetadata checks additionalPodMetadata the way the API server would check pod
// metadata, so a bad key or value becomes a condition on the claim, not a pod that never comes;
// and refuses what the rules reserve (system domains, the router's labels), which the CRD's CEL
// rules also refuse at admission for the fixed part.
func validatePodMetadata(md agentsv1beta1.PodMetadata, rules podmeta.Rules) error {
	problems := rules.Problems(md.Labels, md.Annotations)
	for k, v := range md.Labels {
		for _, msg := range validation.IsQualifiedName(k) {
			problems = append(problems, fmt.Sprintf("label key %q: %s", k, msg))
		}
		for _, msg := range validation.IsValidLabelValue(v) {
			problems = append(problems, fmt.Sprintf("label %s value %q: %s", k, v, msg))
		}
	}
	for k := range md.Annotations {
		for _, msg := range validation.IsQualifiedName(strings.ToLower(k)) {
			problems = append(problems, fmt.Sprintf("annotation key %q: %s", k, msg))
		}
	}
	if len(problems) == 0 {
		return nil
	}
	sort.Strings(problems)
	return &userError{extv1beta1.ReasonInvalidMetadata, "spec.additionalPodMetadata: " + strings.Join(problems, "; ")}
}

// mergePodMetadata adds the claim's pod labels and annotations to the Sandbox's pod template.
func mergePodMetadata(dst *agentsv1beta1.PodMetadata, add agentsv1beta1.PodMetadata) {
	if len(add.Labels) > 0 && dst.Labels == nil {
		dst.Labels = map[string]string{}
	}
	for k, v := range add.Labels {
		dst.Labels[k] = v
	}
	if len(add.Annotations) > 0 && dst.Annotations == nil {
		dst.Annotations = map[string]string{}
	}
	for k, v := range add.Annotations {
		dst.Annotations[k] = v
	}
}
