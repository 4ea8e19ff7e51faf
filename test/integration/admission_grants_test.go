package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/agent-sandbox/agent-sandbox/api/v1alpha1"
	"github.com/agent-sandbox/agent-sandbox/internal/testwrap"
)

// The rule "a Sandbox grants no more than its author holds" (docs/security.md): every
// ServiceAccount, Secret, ConfigMap, PVC, data source and priority class a Sandbox's or
// SandboxTemplate's pod refers to is authorized as its author. Each case is an attack a tenant
// (agent-sandbox-user only) ran against the API before the policy existed, named after it; the
// control is the same request by an identity that holds the right.

const (
	referencesPolicy  = "agent-sandbox-references"
	podSecurityPolicy = "agent-sandbox-pod-security"
	frozenPolicy      = "agent-sandbox-frozen"
	sizePolicy        = "agent-sandbox-size"
	asReader          = "reader"          // agent-sandbox-user, and get on what the cases refer to
	asTemplateWriter  = "template-writer" // may write SandboxTemplates, and nothing it refers to
)

// readerRights are what asReader holds beyond agent-sandbox-user: exactly the objects the
// cases refer to.
var readerRights = []rbacv1.PolicyRule{
	{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}, ResourceNames: []string{"db-creds", "mine-router-token", "registry"}},
	{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}, ResourceNames: []string{"settings"}},
	{APIGroups: []string{""}, Resources: []string{"persistentvolumeclaims"}, Verbs: []string{"get"}, ResourceNames: []string{"shared-data"}},
	{APIGroups: []string{""}, Resources: []string{"serviceaccounts/token"}, Verbs: []string{"create"}, ResourceNames: []string{"agent-server"}},
	{APIGroups: []string{"snapshot.storage.k8s.io"}, Resources: []string{"volumesnapshots"}, Verbs: []string{"get"}, ResourceNames: []string{"golden"}},
	{APIGroups: []string{"scheduling.k8s.io"}, Resources: []string{"priorityclasses"}, Verbs: []string{"use"}, ResourceNames: []string{"batch-high"}},
}

// grantIdentitiesIn adds asReader and asTemplateWriter to the identities of identitiesIn.
func grantIdentitiesIn(t *testing.T, ns string) {
	t.Helper()
	mustCreateObj(t, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "reads-references"}, Rules: readerRights[:5]})
	mustCreateObj(t, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "writes-templates"}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{"extensions.agents.x-k8s.io"}, Resources: []string{"sandboxtemplates"}, Verbs: []string{"create", "update", "patch"},
	}}})
	// Priority classes are cluster-scoped: their use is granted cluster-wide, as the chart does.
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "uses-batch-high-" + ns}, Rules: readerRights[5:]}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "uses-batch-high-" + ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: asReader}}}
	mustCreateObj(t, role, binding)
	t.Cleanup(func() {
		_ = k8s.Delete(context.Background(), binding)
		_ = k8s.Delete(context.Background(), role)
	})
	bindRoles(t, ns, asReader, "ClusterRole/agent-sandbox-user", "Role/reads-references", "Role/writes-templates")
	bindRoles(t, ns, asTemplateWriter, "ClusterRole/agent-sandbox-user", "Role/writes-templates")
	waitForRight(t, ns, asReader, "create", "", "x")
	waitForRight(t, ns, asTemplateWriter, "create", "", "x")
}

func referenceRefusal(ns, who, what string) string {
	return fmt.Sprintf("spec.podTemplate.spec: %s: system:serviceaccount:%s:%s may not get every one of them; a Sandbox's pod may use only "+
		"what its author could read directly", what, ns, who)
}

func podSpecFragment(spec string) string { return "spec: {podTemplate: {spec: " + spec + "}}" }

func TestASandboxUsesOnlyWhatItsAuthorMayRead(t *testing.T) {
	ns := newNamespace(t)
	ids := identitiesIn(t, ns)
	grantIdentitiesIn(t, ns)
	for _, id := range []string{asReader, asTemplateWriter} {
		ids[id] = actAs(t, ns, id)
	}
	// A raw Sandbox a namespace admin made with a Secret, which its tenant may still pause.
	mustCreateObj(t, testwrap.MakeSandbox(ns, "admins").Obj())
	secretVolume := podSpecFragment(`{volumes: [{name: s, secret: {secretName: db-creds}}]}`)
	envSecret := podSpecFragment(`{containers: [{name: runtime, image: runtime:1, env: [{name: PW, valueFrom: {secretKeyRef: {name: db-creds, key: pw}}}]}]}`)
	refusal := func(who, what string) string { return referenceRefusal(ns, who, what) }
	cases := []admissionCase{
		{name: "any Secret of the namespace through a volume", as: asTenant, create: secretVolume,
			policy: referencesPolicy, want: refusal(asTenant, "Secret db-creds")},
		{name: "any Secret through env secretKeyRef", as: asTenant, create: envSecret, policy: referencesPolicy, want: refusal(asTenant, "Secret db-creds")},
		{name: "any Secret through envFrom, in an init container", as: asTenant,
			create: podSpecFragment(`{initContainers: [{name: init, image: i, envFrom: [{secretRef: {name: db-creds}}]}]}`), policy: referencesPolicy, want: refusal(asTenant, "Secret db-creds")},
		{name: "any Secret through a projected volume", as: asTenant,
			create: podSpecFragment(`{volumes: [{name: p, projected: {sources: [{configMap: {name: settings}}, {secret: {name: db-creds}}]}}]}`),
			policy: referencesPolicy, want: refusal(asTenant, "Secret db-creds")},
		{name: "a claim's router token", as: asTenant, create: podSpecFragment(`{volumes: [{name: s, secret: {secretName: mine-router-token}}]}`),
			policy: referencesPolicy, want: refusal(asTenant, "Secret mine-router-token")},
		{name: "registry credentials", as: asTenant, create: podSpecFragment(`{imagePullSecrets: [{name: registry}]}`), policy: referencesPolicy, want: refusal(asTenant, "Secret registry")},
		{name: "a CSI driver's secret", as: asTenant, create: podSpecFragment(`{volumes: [{name: c, csi: {driver: d.example.com, nodePublishSecretRef: {name: db-creds}}}]}`),
			policy: referencesPolicy, want: refusal(asTenant, "Secret db-creds")},
		{name: "any Secret, in v1beta1", as: asTenant, version: "v1beta1", create: secretVolume, policy: referencesPolicy, want: refusal(asTenant, "Secret db-creds")},
		{name: "any ConfigMap through a volume", as: asTenant, create: podSpecFragment(`{volumes: [{name: c, configMap: {name: settings}}]}`),
			policy: referencesPolicy, want: refusal(asTenant, "ConfigMap settings")},
		{name: "any ConfigMap through env", as: asTenant,
			create: podSpecFragment(`{containers: [{name: runtime, image: runtime:1, env: [{name: A, valueFrom: {configMapKeyRef: {name: settings, key: a}}}]}]}`),
			policy: referencesPolicy, want: refusal(asTenant, "ConfigMap settings")},
		{name: "another workload's PVC", as: asTenant, create: podSpecFragment(`{volumes: [{name: data, persistentVolumeClaim: {claimName: shared-data}}]}`),
			policy: referencesPolicy, want: "spec.podTemplate.spec.volumes: PersistentVolumeClaim shared-data: system:serviceaccount:" + ns + ":" + asTenant +
				" may not get every one of them; a Sandbox's pod may use only what its author could read directly"},
		{name: "a PVC volume named like a claim template is the Sandbox's own", as: asTenant,
			create: `spec: {volumeClaimTemplates: [{metadata: {name: home}, spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}}], ` +
				`podTemplate: {spec: {volumes: [{name: home, persistentVolumeClaim: {claimName: shared-data}}]}}}`},
		{name: "an ephemeral volume cloned from another PVC", as: asTenant,
			create: podSpecFragment(`{volumes: [{name: e, ephemeral: {volumeClaimTemplate: {spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}, ` +
				`dataSource: {kind: PersistentVolumeClaim, name: shared-data}}}}}]}`),
			policy: referencesPolicy, want: "spec: volume data source persistentvolumeclaims/shared-data: system:serviceaccount:" + ns + ":" + asTenant +
				" may not get every one of them; a new volume may be cloned only from what its author could read directly"},
		{name: "an ephemeral volume cloned from another PVC, in v1beta1", as: asTenant, version: "v1beta1",
			create: podSpecFragment(`{volumes: [{name: e, ephemeral: {volumeClaimTemplate: {spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}, ` +
				`dataSource: {kind: PersistentVolumeClaim, name: shared-data}}}}}]}`),
			policy: referencesPolicy, want: "spec: volume data source persistentvolumeclaims/shared-data: system:serviceaccount:" + ns + ":" + asTenant +
				" may not get every one of them; a new volume may be cloned only from what its author could read directly"},
		{name: "a claim template restored from a snapshot", as: asTenant,
			create: `spec: {volumeClaimTemplates: [{metadata: {name: home}, spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}, ` +
				`dataSourceRef: {apiGroup: snapshot.storage.k8s.io, kind: VolumeSnapshot, name: golden}}}]}`,
			policy: referencesPolicy, want: "spec: volume data source volumesnapshots/golden: system:serviceaccount:" + ns + ":" + asTenant +
				" may not get every one of them; a new volume may be cloned only from what its author could read directly"},
		{name: "another ServiceAccount of the namespace", as: asTenant, create: podSpecFragment(`{serviceAccountName: agent-server}`), policy: referencesPolicy,
			want: "spec.podTemplate.spec.serviceAccountName: ServiceAccount agent-server that system:serviceaccount:" + ns + ":" + asTenant +
				" may not create a token for (create on serviceaccounts/token); a Sandbox's pod may run only as an identity its author could obtain directly"},
		{name: "the default ServiceAccount", as: asTenant, create: podSpecFragment(`{serviceAccountName: default}`)},
		{name: "a priority class nobody granted", as: asTenant, create: podSpecFragment(`{priorityClassName: batch-high}`), policy: referencesPolicy,
			want: "spec.podTemplate.spec.priorityClassName: priority class batch-high that system:serviceaccount:" + ns + ":" + asTenant +
				" may not use (use on priorityclasses, scheduling.k8s.io); the chart's admission.priorityClasses lists the ones everybody may use"},
		{name: "a template naming a Secret its writer may not get", as: asTemplateWriter, kind: "SandboxTemplate", create: secretVolume,
			policy: referencesPolicy, want: refusal(asTemplateWriter, "Secret db-creds")},
		{name: "a tenant adds a Secret to a raw Sandbox it may update", as: asTenant, target: "admins",
			patch:  `{"spec":{"podTemplate":{"spec":{"volumes":[{"name":"s","secret":{"secretName":"mine-router-token"}}]}}}}`,
			policy: referencesPolicy, want: refusal(asTenant, "Secret mine-router-token")},
		// Controls: the same references by someone who holds the rights.
		{name: "reader mounts the Secret", as: asReader, create: secretVolume},
		{name: "reader uses every reference at once", as: asReader, create: `spec: {podTemplate: {spec: {serviceAccountName: agent-server, priorityClassName: batch-high, ` +
			`imagePullSecrets: [{name: registry}], volumes: [{name: s, secret: {secretName: db-creds}}, {name: c, configMap: {name: settings}}, ` +
			`{name: d, persistentVolumeClaim: {claimName: shared-data}}]}}, volumeClaimTemplates: [{metadata: {name: home}, spec: {accessModes: [ReadWriteOnce], ` +
			`resources: {requests: {storage: 1Gi}}, dataSourceRef: {apiGroup: snapshot.storage.k8s.io, kind: VolumeSnapshot, name: golden}}}]}`},
		{name: "reader writes a template with the Secret", as: asReader, kind: "SandboxTemplate", create: envSecret},
		{name: "the controller creates a Sandbox from such a template", as: asController, create: envSecret},
		{name: "a cluster admin creates one", as: asAdmin, create: secretVolume},
		{name: "a tenant pauses a Sandbox whose Secret it may not read", as: asTenant, target: "admins", patch: `{"spec":{"replicas":0}}`},
	}
	mustPatch(t, testwrap.MakeSandbox(ns, "admins").Obj(), `{"spec":{"podTemplate":{"spec":{"volumes":[{"name":"s","secret":{"secretName":"db-creds"}}]}}}}`)
	runAdmissionCases(t, ns, ids, cases)
}

// Pod Security "restricted" holds for every Sandbox and template unless the namespace opts out;
// root runs only on the installation's default runtime class.
func TestASandboxRunsRestrictedUnlessItsNamespaceOptsOut(t *testing.T) {
	ns := newNamespace(t)
	ids := identitiesIn(t, ns)
	const optOut = " in this namespace; a cluster admin allows it by labelling the namespace agents.x-k8s.io/pod-security=baseline"
	rootOnRunc := podSpecFragment(`{runtimeClassName: runc, securityContext: {runAsUser: 0}}`)
	container := func(sc string) string {
		return podSpecFragment(`{containers: [{name: runtime, image: runtime:1, securityContext: ` + sc + `}]}`)
	}
	cases := []admissionCase{
		{name: "root on the node's kernel", as: asTenant, create: rootOnRunc, policy: podSecurityPolicy,
			want: "spec.podTemplate.spec.securityContext.runAsUser: root runs only on the installation's default runtime class (leave runtimeClassName unset, not runc)" + optOut},
		{name: "a root container on the node's kernel in v1beta1", as: asTenant, version: "v1beta1",
			create: `spec: {podTemplate: {spec: {runtimeClassName: runc, containers: [{name: runtime, image: runtime:1, securityContext: {runAsNonRoot: false}}]}}}`, policy: podSecurityPolicy,
			want: "spec.podTemplate.spec.containers[runtime].securityContext.runAsNonRoot: root runs only on the installation's default runtime class (leave runtimeClassName unset, not runc)" + optOut},
		{name: "privilege escalation", as: asTenant, create: container(`{allowPrivilegeEscalation: true}`), policy: podSecurityPolicy,
			want: "spec.podTemplate.spec.containers[runtime].securityContext.allowPrivilegeEscalation: privilege escalation is not allowed" + optOut},
		{name: "keeping capabilities (NET_RAW, MKNOD)", as: asTenant, create: container(`{capabilities: {drop: [SYS_ADMIN]}}`), policy: podSecurityPolicy,
			want: "spec.podTemplate.spec.containers[runtime].securityContext.capabilities.drop: a container that sets capabilities drops ALL " +
				"(leave capabilities unset and the controller drops them); keeping some is not allowed" + optOut},
		{name: "a template on the node's kernel as root, by a cluster admin", as: asAdmin, kind: "SandboxTemplate",
			create: podSpecFragment(`{runtimeClassName: "", securityContext: {runAsUser: 0}}`), policy: podSecurityPolicy,
			want: "spec.podTemplate.spec.securityContext.runAsUser: root runs only on the installation's default runtime class (leave runtimeClassName unset, not )" + optOut},
		// Controls.
		{name: "root on the default runtime class", as: asTenant, create: podSpecFragment(`{securityContext: {runAsUser: 0}}`)},
		{name: "the controller's Sandbox of a root template, with the default class filled in", as: asController,
			create: podSpecFragment(`{runtimeClassName: gvisor, securityContext: {runAsUser: 0}}`)},
		{name: "non-root on the node's kernel", as: asTenant, create: podSpecFragment(`{runtimeClassName: runc, securityContext: {runAsUser: 1000}}`)},
		{name: "capabilities dropped", as: asTenant, create: container(`{capabilities: {drop: [ALL]}, allowPrivilegeEscalation: false}`)},
	}
	runAdmissionCases(t, ns, ids, cases)

	baseline := newNamespace(t)
	labelNamespace(t, baseline, "agents.x-k8s.io/pod-security", "baseline")
	baselineIDs := identitiesIn(t, baseline)
	t.Run("in a namespace labelled agents.x-k8s.io/pod-security=baseline", func(t *testing.T) {
		runAdmissionCases(t, baseline, baselineIDs, []admissionCase{
			{name: "root on the node's kernel", as: asTenant, create: rootOnRunc},
			{name: "escalation and kept capabilities", as: asTenant, create: container(`{allowPrivilegeEscalation: true, capabilities: {drop: [SYS_ADMIN]}}`)},
			{name: "but not host access", as: asTenant, create: podSpecFragment(`{hostPID: true}`), policy: hostAccessPolicy,
				want: hostRefusal("spec.podTemplate.spec.hostPID", "the host's process namespace is")},
		})
	})
}

// What Pod Security "baseline" refuses, and a pod's choice of node, network volumes and system
// priority, are host access: refused whoever asks unless the namespace is opted in.
func TestBaselineAndNodeChoicesNeedAnOptedInNamespace(t *testing.T) {
	ns := newNamespace(t)
	ids := identitiesIn(t, ns)
	container := func(field string) string {
		return podSpecFragment(`{containers: [{name: runtime, image: runtime:1, ` + field + `}]}`)
	}
	const opt = "; a cluster admin allows it by labelling the namespace agents.x-k8s.io/host-access=allowed"
	confinement := ": settings that lift the node's confinement (Unconfined seccomp or AppArmor, an unmasked /proc, a Windows host process, " +
		"a custom SELinux user, role or type) are not allowed in this namespace" + opt
	cases := []admissionCase{
		{name: "a host port", as: asTenant, create: container(`ports: [{containerPort: 80, hostPort: 80}]`), policy: hostAccessPolicy,
			want: "spec.podTemplate.spec.containers[runtime].ports.hostPort: host ports are not allowed in this namespace" + opt},
		{name: "Unconfined seccomp on the pod", as: asTenant, create: podSpecFragment(`{securityContext: {seccompProfile: {type: Unconfined}}}`), policy: hostAccessPolicy,
			want: "spec.podTemplate.spec.securityContext.seccompProfile" + confinement},
		{name: "Unconfined AppArmor in a container", as: asTenant, create: container(`securityContext: {appArmorProfile: {type: Unconfined}}`), policy: hostAccessPolicy,
			want: "spec.podTemplate.spec.containers[runtime].securityContext.appArmorProfile" + confinement},
		{name: "an unmasked /proc", as: asTenant, create: container(`securityContext: {procMount: Unmasked}`), policy: hostAccessPolicy,
			want: "spec.podTemplate.spec.containers[runtime].securityContext.procMount" + confinement},
		{name: "a custom SELinux type", as: asTenant, create: podSpecFragment(`{securityContext: {seLinuxOptions: {type: spc_t}}}`), policy: hostAccessPolicy,
			want: "spec.podTemplate.spec.securityContext.seLinuxOptions" + confinement},
		{name: "an unsafe sysctl", as: asTenant, create: podSpecFragment(`{securityContext: {sysctls: [{name: kernel.msgmax, value: "1"}]}}`), policy: hostAccessPolicy,
			want: "spec.podTemplate.spec.securityContext.sysctls[kernel.msgmax]: sysctls outside Pod Security's safe set are not allowed in this namespace" + opt},
		{name: "an NFS volume", as: asTenant, create: podSpecFragment(`{volumes: [{name: nfs-data, nfs: {server: 10.0.0.1, path: /}}]}`), policy: hostAccessPolicy,
			want: "spec.podTemplate.spec.volumes[nfs-data]: volumes the node mounts from the network or fills by running a tool (in-tree drivers, gitRepo) " +
				"are not allowed in this namespace; use a PersistentVolumeClaim" + opt},
		{name: "a gitRepo volume", as: asTenant, create: podSpecFragment(`{volumes: [{name: g, gitRepo: {repository: "https://example.com/x.git"}}]}`), policy: hostAccessPolicy,
			want: "spec.podTemplate.spec.volumes[g]: volumes the node mounts from the network or fills by running a tool (in-tree drivers, gitRepo) " +
				"are not allowed in this namespace; use a PersistentVolumeClaim" + opt},
		{name: "a chosen node", as: asTenant, create: podSpecFragment(`{nodeName: control-plane}`), policy: hostAccessPolicy,
			want: "spec.podTemplate.spec.nodeName: choosing the node past the scheduler is not allowed in this namespace; a cluster admin allows it " +
				"by labelling the namespace agents.x-k8s.io/host-access=allowed"},
		{name: "tolerating the control plane's taint", as: asTenant,
			create: podSpecFragment(`{tolerations: [{key: node-role.kubernetes.io/control-plane, operator: Exists, effect: NoSchedule}]}`), policy: hostAccessPolicy,
			want: "spec.podTemplate.spec.tolerations[node-role.kubernetes.io/control-plane:NoSchedule]: tolerating a node's taints is not allowed in this namespace" + opt},
		{name: "system priority", as: asTenant, create: podSpecFragment(`{priorityClassName: system-node-critical}`), policy: hostAccessPolicy,
			want: "spec.podTemplate.spec.priorityClassName: the system priority classes are not allowed in this namespace; a cluster admin allows them " +
				"by labelling the namespace agents.x-k8s.io/host-access=allowed"},
		// Controls.
		{name: "the default tolerations", as: asTenant, create: podSpecFragment(`{tolerations: [{key: node.kubernetes.io/not-ready, operator: Exists, effect: NoExecute, ` +
			`tolerationSeconds: 300}, {key: node.kubernetes.io/unreachable, operator: Exists, effect: NoExecute, tolerationSeconds: 300}]}`)},
		{name: "safe sysctls, a container SELinux type and RuntimeDefault", as: asTenant, create: podSpecFragment(`{securityContext: {sysctls: [{name: net.ipv4.ping_group_range, ` +
			`value: "0 1"}], seLinuxOptions: {type: container_t}, seccompProfile: {type: RuntimeDefault}}}`)},
		{name: "a container port without a host port", as: asTenant, create: container(`ports: [{containerPort: 80}]`)},
	}
	runAdmissionCases(t, ns, ids, cases)

	opted := newNamespace(t)
	labelNamespace(t, opted, "agents.x-k8s.io/host-access", "allowed")
	optedIDs := identitiesIn(t, opted)
	t.Run("in a namespace labelled agents.x-k8s.io/host-access=allowed", func(t *testing.T) {
		runAdmissionCases(t, opted, optedIDs, []admissionCase{
			{name: "all of them", as: asTenant, create: `spec: {podTemplate: {spec: {nodeName: node-1, priorityClassName: system-node-critical, ` +
				`tolerations: [{operator: Exists}], volumes: [{name: nfs-data, nfs: {server: 10.0.0.1, path: /}}], securityContext: {seccompProfile: {type: Unconfined}}, ` +
				`containers: [{name: runtime, image: runtime:1, ports: [{containerPort: 80, hostPort: 80}], securityContext: {runAsUser: 0}}], runtimeClassName: runc}}}`},
		})
	})
}

// mustPatch applies a merge patch as a cluster admin.
func mustPatch(t *testing.T, obj *agentsv1alpha1.Sandbox, patch string) {
	t.Helper()
	if err := k8s.Patch(context.Background(), obj, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatalf("patching %s: %v", obj.Name, err)
	}
}

func frozenClaimRefusal(name, owner string) string {
	return "spec.podTemplate: the pod template and volume claim templates of Sandbox " + name + " (owned by " + owner + ") are its " +
		"template's, changed only by the agent-sandbox controller (update on sandboxes/ownership, agents.x-k8s.io); its user may change " +
		"replicas, operatingMode, shutdownTime and metadata"
}

func frozenMemberRefusal(name, pool string) string {
	return "spec: Sandbox " + name + " is an unclaimed member of SandboxWarmPool/" + pool + ", changed only by the agent-sandbox controller " +
		"(update on sandboxes/ownership, agents.x-k8s.io); claim it with a SandboxClaim first"
}

// Nobody but the controller changes a sandbox that someone else will be handed: a tenant can
// neither backdoor an unclaimed warm member (which another user's claim would adopt) nor undo
// its own claim's hardening by replacing the pod template; it still pauses, resumes and
// expires its claim's Sandbox. The controller (and a cluster admin) can.
func TestNobodyButTheControllerChangesAClaimedOrPooledSandbox(t *testing.T) {
	ns := newNamespace(t)
	ids := identitiesIn(t, ns)
	mustCreateObj(t, testwrap.MakeTemplate(ns, "tmpl").Obj())
	if err := ids[asTenant].Create(context.Background(), testwrap.MakeClaim(ns, "mine").Template("tmpl").WarmPool("none").Obj()); err != nil {
		t.Fatalf("the tenant creating a claim: %v", err)
	}
	testwrap.Eventually(t, "the claim's Sandbox exists", exists(&agentsv1alpha1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mine"}}, true))
	mustCreateObj(t, testwrap.MakeWarmPool(ns, "pool").Template("tmpl").Replicas(1).Obj())
	member := waitForPoolMember(t, ns, "pool")

	backdoor := `{"spec":{"podTemplate":{"spec":{"containers":[{"name":"runtime","image":"evil:1","command":["sh","-c","steal"]}]}}}}`
	unharden := `{"spec":{"podTemplate":{"spec":{"runtimeClassName":null,"securityContext":{"runAsUser":0,"runAsNonRoot":null}}}}}`
	cases := []admissionCase{
		{name: "backdoor an unclaimed warm member's command and image", as: asTenant, target: member, patch: backdoor,
			policy: frozenPolicy, want: frozenMemberRefusal(member, "pool")},
		{name: "pause a warm member (to restart it on a changed spec)", as: asTenant, target: member, patch: `{"spec":{"replicas":0}}`,
			policy: frozenPolicy, want: frozenMemberRefusal(member, "pool")},
		{name: "backdoor a warm member in v1beta1", as: asTenant, version: "v1beta1", target: member, patch: `{"spec":{"operatingMode":"Suspended"}}`,
			policy: frozenPolicy, want: frozenMemberRefusal(member, "pool")},
		{name: "undo the hardening of one's own claim", as: asTenant, target: "mine", patch: unharden,
			policy: frozenPolicy, want: frozenClaimRefusal("mine", "SandboxClaim/mine")},
		{name: "add a volume claim template to one's claim", as: asTenant, target: "mine",
			patch:  `{"spec":{"volumeClaimTemplates":[{"metadata":{"name":"x"},"spec":{"accessModes":["ReadWriteOnce"],"resources":{"requests":{"storage":"1Gi"}}}}]}}`,
			policy: frozenPolicy, want: frozenClaimRefusal("mine", "SandboxClaim/mine")},
		{name: "rename a warm member's template", as: asTenant, target: member,
			patch: `{"metadata":{"annotations":{"agents.x-k8s.io/sandbox-template-ref":"other"}}}`, policy: ownershipPolicy,
			want: "metadata.annotations[agents.x-k8s.io/sandbox-template-ref]: the template a Sandbox was made from is recorded only by the " +
				"agent-sandbox controller; setting, changing or removing it needs update on sandboxes/ownership (agents.x-k8s.io)"},
		{name: "forge the node name v1beta1 readers see", as: asTenant, target: "mine",
			patch: `{"metadata":{"annotations":{"agents.x-k8s.io/sandbox-conversion":"{\"nodeName\":\"control-plane\"}"}}}`, policy: ownershipPolicy,
			want: "metadata.annotations[agents.x-k8s.io/sandbox-conversion]: status.nodeName is not written through the main resource; setting it " +
				"needs update on sandboxes/ownership (agents.x-k8s.io)"},
		{name: "a raw Sandbox passing for a template's (to keep the node's runtime)", as: asTenant,
			create: `metadata: {annotations: {agents.x-k8s.io/sandbox-template-ref: tmpl}}`, policy: ownershipPolicy,
			want: "metadata.annotations[agents.x-k8s.io/sandbox-template-ref]: the template a Sandbox was made from is recorded only by the " +
				"agent-sandbox controller; setting, changing or removing it needs update on sandboxes/ownership (agents.x-k8s.io)"},
		// Controls.
		{name: "pause one's claim", as: asTenant, target: "mine", patch: `{"spec":{"replicas":0}}`},
		{name: "set one's claim's shutdown time in v1beta1", as: asTenant, version: "v1beta1", target: "mine",
			patch: `{"spec":{"shutdownTime":"2030-01-01T00:00:00Z"}}`},
		{name: "label a warm member for a query", as: asTenant, target: member, patch: `{"metadata":{"labels":{"team.example.com/x":"y"}}}`},
		{name: "the controller changes a claim's pod template", as: asController, target: "mine", patch: backdoor},
		{name: "the controller pauses a warm member", as: asController, target: member, patch: `{"spec":{"replicas":0}}`},
		{name: "a cluster admin changes a warm member", as: asAdmin, target: member, patch: backdoor},
	}
	runAdmissionCases(t, ns, ids, cases)
}

// waitForPoolMember waits for a member of the pool and returns its name.
func waitForPoolMember(t *testing.T, ns, pool string) string {
	t.Helper()
	var name string
	testwrap.Eventually(t, "a member of pool "+pool, func() error {
		list := &agentsv1alpha1.SandboxList{}
		if err := k8s.List(context.Background(), list, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, sb := range list.Items {
			if owner := metav1.GetControllerOf(&sb); owner != nil && owner.Kind == "SandboxWarmPool" && owner.Name == pool {
				name = sb.Name
				return nil
			}
		}
		return fmt.Errorf("no member yet among %d Sandboxes", len(list.Items))
	})
	return name
}

// One Sandbox cannot make every controller replica hold megabytes: a pod template's text is
// bounded (the attack: 80 Sandboxes of 1 MiB grew two replicas' heaps by 165 MiB).
func TestAPodTemplateIsBoundedInSize(t *testing.T) {
	ns := newNamespace(t)
	ids := identitiesIn(t, ns)
	big := strings.Repeat("x", 300<<10)
	env := func(value string) string {
		return podSpecFragment(`{containers: [{name: runtime, image: runtime:1, env: [{name: BLOB, value: "` + value + `"}]}]}`)
	}
	tooLarge := func(n int) string {
		return fmt.Sprintf("spec.podTemplate: its images, commands, arguments, env, working directories and pod labels and annotations hold %d bytes; "+
			"at most 262144 (256 KiB) are allowed, as every controller replica keeps each Sandbox in memory; put large data in a volume", n)
	}
	runAdmissionCases(t, ns, ids, []admissionCase{
		{name: "a 300 KiB env value", as: asTenant, create: env(big), policy: sizePolicy, want: tooLarge(len(big) + len("BLOB") + len("runtime:1"))},
		{name: "a 300 KiB pod annotation, by a cluster admin", as: asAdmin, kind: "SandboxTemplate",
			create: `spec: {podTemplate: {metadata: {annotations: {blob: "` + big + `"}}}}`, policy: sizePolicy, want: tooLarge(len(big) + len("blob") + len("runtime:1"))},
		{name: "a 100 KiB env value", as: asTenant, create: env(big[:100<<10])},
	})
}
