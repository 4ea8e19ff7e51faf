package sandboxclaim

import (
	"encoding/json"
	"fmt"

	extv1beta1 "github.com/agent-sandbox/agent-sandbox/api/extensions/v1beta1"
	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
)

// A claim's env on a warm Sandbox: the pod was started without it and cannot take it on, but
// when the template's container runs sandboxd the env can go to sandboxd instead. It travels in
// the Sandbox's session-env annotation, written by the adoption's one patch (no extra write);
// the router hands it to sandboxd with each request; sandboxd gives it to every process it
// starts, under the request's own env (docs/claims.md).

// sessionEnv is the claim's env as the session env of a warm Sandbox, or, when the claim cannot
// take that path, why it starts cold. The env has passed injectEnv (the template's policy)
// before this is asked. A claim without env has neither.
func sessionEnv(tmpl *extv1beta1.SandboxTemplate, env []extv1beta1.EnvVar) (map[string]string, string) {
	if len(env) == 0 {
		return nil, ""
	}
	sandboxd := tmpl.Annotations[extv1beta1.SandboxdContainerAnnotation]
	containers := tmpl.Spec.PodTemplate.Spec.Containers
	if sandboxd == "" {
		return nil, fmt.Sprintf("the claim has env and template %q declares no sandboxd container (annotation %s), so the env goes into a new pod's spec",
			tmpl.Name, extv1beta1.SandboxdContainerAnnotation)
	}
	if findContainer(&tmpl.Spec.PodTemplate.Spec, sandboxd) == nil {
		return nil, fmt.Sprintf("template %q names container %q in %s and has no such container",
			tmpl.Name, sandboxd, extv1beta1.SandboxdContainerAnnotation)
	}
	out := make(map[string]string, len(env))
	for _, e := range env {
		target := e.ContainerName
		if target == "" && len(containers) > 0 {
			target = containers[0].Name
		}
		if target != sandboxd {
			return nil, fmt.Sprintf("env %s targets container %q, and sandboxd runs in %q", e.Name, target, sandboxd)
		}
		out[e.Name] = e.Value
	}
	return out, ""
}

// setSessionEnv puts env on the Sandbox as the annotation the router reads.
func setSessionEnv(sb *agentsv1beta1.Sandbox, env map[string]string) error {
	if len(env) == 0 {
		return nil
	}
	b, err := json.Marshal(env)
	if err != nil {
		return err
	}
	if sb.Annotations == nil {
		sb.Annotations = map[string]string{}
	}
	sb.Annotations[agentsv1beta1.SessionEnvAnnotation] = string(b)
	return nil
}

// sessionEnvNote is what the claim's Ready condition adds for a warm Sandbox that carries the
// claim's env, so its user sees which path the claim took; "" for any other Sandbox.
func sessionEnvNote(sb *agentsv1beta1.Sandbox) string {
	raw, ok := sb.Annotations[agentsv1beta1.SessionEnvAnnotation]
	if !ok {
		return ""
	}
	var env map[string]string
	if json.Unmarshal([]byte(raw), &env) != nil {
		return ""
	}
	return fmt.Sprintf("warm, with the claim's env (%d variables), which sandboxd gives every process it starts", len(env))
}
