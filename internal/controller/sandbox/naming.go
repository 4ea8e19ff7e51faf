package sandbox

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation"

	agentsv1beta1 "github.com/agent-sandbox/agent-sandbox/api/v1beta1"
)

// Selector is the label selector of the pod of the named Sandbox, as written in status.selector.
func Selector(sandboxName string) string {
	return agentsv1beta1.SandboxNameHashLabel + "=" + agentsv1beta1.NameHash(sandboxName)
}

// PVCName is the name of the claim made from a volume claim template for a Sandbox, as a
// StatefulSet would name it.
func PVCName(templateName, sandboxName string) string {
	return templateName + "-" + sandboxName
}

// ServiceFQDN is the DNS name of the Sandbox's headless Service.
func ServiceFQDN(service, namespace, clusterDomain string) string {
	return fmt.Sprintf("%s.%s.svc.%s", service, namespace, clusterDomain)
}

// trackingLabels are the labels that tie a child object to its Sandbox.
func trackingLabels(sb *agentsv1beta1.Sandbox) map[string]string {
	l := map[string]string{agentsv1beta1.SandboxNameHashLabel: agentsv1beta1.NameHash(sb.Name)}
	if len(validation.IsValidLabelValue(sb.Name)) == 0 {
		l[agentsv1beta1.SandboxNameLabel] = sb.Name
	}
	return l
}

// podIdentityLabels are the labels the controller puts on the pod and nobody else may set: the
// tracking labels and the mark every sandbox pod carries. Selectors (Service, NetworkPolicy) use
// trackingLabels only.
func podIdentityLabels(sb *agentsv1beta1.Sandbox) map[string]string {
	l := trackingLabels(sb)
	l[agentsv1beta1.SandboxPodLabel] = agentsv1beta1.SandboxPodLabelValue
	return l
}
