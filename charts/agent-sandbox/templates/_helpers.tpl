{{/* Labels every object of the release carries. */}}
{{- define "agent-sandbox.labels" -}}
app.kubernetes.io/part-of: agent-sandbox
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* image renders repository:tag, the tag defaulting to the chart's appVersion. */}}
{{- define "agent-sandbox.image" -}}
{{- printf "%s:%s" .image.repository (default .chart.AppVersion .image.tag) -}}
{{- end -}}

{{/* The restricted pod security profile, met by both components. */}}
{{- define "agent-sandbox.podSecurityContext" -}}
runAsNonRoot: true
seccompProfile:
  type: RuntimeDefault
{{- end -}}
{{- define "agent-sandbox.containerSecurityContext" -}}
runAsUser: 65532
runAsGroup: 65532
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: ["ALL"]
{{- end -}}

{{/*
scheduling renders nodeSelector, tolerations and affinity of a component's values (.values) for
its pods (labelled app=.app). Without an affinity of their own, replicas prefer different nodes,
so that one node going away leaves one serving.
*/}}
{{- define "agent-sandbox.scheduling" -}}
{{- with .values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
affinity:
{{- if .values.affinity }}
  {{- toYaml .values.affinity | nindent 2 }}
{{- else }}
  podAntiAffinity:
    preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 100
      podAffinityTerm:
        topologyKey: kubernetes.io/hostname
        labelSelector:
          matchLabels:
            app: {{ .app }}
{{- end }}
{{- end -}}

{{/*
pdb keeps one replica of a component (.name, pods labelled app=.app, in .namespace) through
voluntary disruptions (node drains, cluster upgrades) when it runs more than one.
*/}}
{{- define "agent-sandbox.pdb" -}}
{{- if gt (int .replicas) 1 }}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ .name }}
  namespace: {{ .namespace }}
  labels:
    {{- include "agent-sandbox.labels" .root | nindent 4 }}
spec:
  minAvailable: 1
  selector:
    matchLabels:
      app: {{ .app }}
{{- end }}
{{- end -}}

{{/*
tracingEnv renders a container's env for OpenTelemetry tracing (docs/tracing.md) from the tracing
values: the standard OTEL_* variables, and the pod's name and namespace as resource attributes.
Nothing while no endpoint is set: the binaries then trace nothing.
*/}}
{{- define "agent-sandbox.tracingEnv" -}}
{{- if .otlpEndpoint -}}
env:
- name: OTEL_EXPORTER_OTLP_ENDPOINT
  value: {{ .otlpEndpoint | quote }}
{{- with .protocol }}
- name: OTEL_EXPORTER_OTLP_PROTOCOL
  value: {{ . | quote }}
{{- end }}
{{- with .sampler }}
- name: OTEL_TRACES_SAMPLER
  value: {{ . | quote }}
{{- end }}
{{- with .samplerArg }}
- name: OTEL_TRACES_SAMPLER_ARG
  value: {{ . | quote }}
{{- end }}
- name: K8S_POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: K8S_NAMESPACE_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
- name: OTEL_RESOURCE_ATTRIBUTES
  value: "k8s.pod.name=$(K8S_POD_NAME),k8s.namespace.name=$(K8S_NAMESPACE_NAME)"
{{- with .extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end }}
{{- end -}}

{{/* The router pod's init container that refuses to start a router naming tokenless callers by
their pod (auth.identifyPods) on a network that lets a pod forge its source address. Root with
NET_RAW alone (raw frames), nothing else; the router container itself stays restricted. */}}
{{- define "agent-sandbox.routerNetworkCheck" -}}
{{- $r := .router -}}
{{- if and $r.auth.identifyPods $r.auth.checkNetwork }}
initContainers:
- name: check-network
  image: {{ include "agent-sandbox.image" (dict "image" $r.image "chart" .root.Chart) }}
  imagePullPolicy: {{ $r.image.pullPolicy }}
  args: [check-network]
  securityContext:
    runAsNonRoot: false
    runAsUser: 0
    allowPrivilegeEscalation: false
    readOnlyRootFilesystem: true
    capabilities:
      drop: ["ALL"]
      add: ["NET_RAW"]
  resources:
    requests: {cpu: 10m, memory: 16Mi}
    limits: {memory: 64Mi}
{{- end }}
{{- end -}}
