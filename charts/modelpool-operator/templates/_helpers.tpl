{{/*
Names, labels and the operator's RBAC rules, shared by the templates. Names and the name/component labels
are config/default's with the default release name (modelpool-operator); Helm's own labels come on top.
*/}}

{{- define "modelpool-operator.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The release's full name: the release name when it already says modelpool-operator, else both. */}}
{{- define "modelpool-operator.fullname" -}}
{{- if contains .Chart.Name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{- define "modelpool-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "modelpool-operator.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* Helm's labels: the ones test/helm/drift.test.sh leaves out when it compares with config/default. */}}
{{- define "modelpool-operator.helmLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* Labels of an object: name, component (the argument's .component), then Helm's. */}}
{{- define "modelpool-operator.labels" -}}
app.kubernetes.io/name: {{ include "modelpool-operator.name" .root }}
app.kubernetes.io/component: {{ .component }}
{{ include "modelpool-operator.helmLabels" .root }}
{{- end }}

{{/* The Deployment's selector: fixed at install (a selector cannot change), as config/manager has it. */}}
{{- define "modelpool-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "modelpool-operator.name" . }}
app.kubernetes.io/component: controller
{{- end }}

{{/*
The controller's rights, as config/rbac/role.yaml grants them (exactly the verbs the operator issues); used
by the ClusterRole, or by the Role in watchNamespace. Comments on each rule are in config/rbac/role.yaml.
*/}}
{{- define "modelpool-operator.rules" -}}
- apiGroups: ["inference.llmkube.dev"]
  resources: ["modelpools"]
  verbs: ["list", "watch", "patch"]
- apiGroups: ["inference.llmkube.dev"]
  resources: ["modelpools/status"]
  verbs: ["patch"]
- apiGroups: ["inference.llmkube.dev"]
  resources: ["inferenceservices"]
  verbs: ["list", "watch", "patch"]
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["list", "watch"]
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create"]
{{- end }}

{{/*
Secure metrics: each scrape's token in a TokenReview, its user in a SubjectAccessReview. Both kinds are
cluster-scoped, so a Role cannot grant them: they join the ClusterRole, or (watchNamespace) a ClusterRole
of their own, <release>-metrics-auth.
*/}}
{{- define "modelpool-operator.reviewRules" -}}
- apiGroups: ["authentication.k8s.io"]
  resources: ["tokenreviews"]
  verbs: ["create"]
- apiGroups: ["authorization.k8s.io"]
  resources: ["subjectaccessreviews"]
  verbs: ["create"]
{{- end }}
{{- define "modelpool-operator.secureMetrics" -}}
{{- if and .Values.metrics.enabled .Values.metrics.secure }}true{{ end }}
{{- end }}

{{/* The metrics port's name: https as kubebuilder names it, http when metrics.secure is false. */}}
{{- define "modelpool-operator.metricsPortName" -}}
{{- ternary "https" "http" .Values.metrics.secure }}
{{- end }}

{{/* The metrics Service is rendered for itself or for the ServiceMonitor. */}}
{{- define "modelpool-operator.serviceMonitorServed" -}}
{{- if .Capabilities.APIVersions.Has "monitoring.coreos.com/v1/ServiceMonitor" }}true{{ end }}
{{- end }}
{{- define "modelpool-operator.metricsService" -}}
{{- if and .Values.metrics.enabled (or .Values.metrics.service.enabled (and .Values.serviceMonitor.enabled (include "modelpool-operator.serviceMonitorServed" .))) }}true{{ end }}
{{- end }}

{{/*
The router (config/router): its objects' name, modelpool-router with the default release name (the full
name with "-operator" made "-router"), its Pods' selector, and its rights (config/router/role.yaml: read
pools, members and Pods; patch pools for the request annotation; nothing on members' writes).
*/}}
{{- define "modelpool-operator.routerName" -}}
{{- printf "%s-router" (include "modelpool-operator.fullname" . | trimSuffix "-operator") | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- define "modelpool-operator.routerSelectorLabels" -}}
app.kubernetes.io/name: {{ include "modelpool-operator.name" . }}
app.kubernetes.io/component: router
{{- end }}
{{- define "modelpool-operator.routerRules" -}}
- apiGroups: ["inference.llmkube.dev"]
  resources: ["modelpools"]
  verbs: ["get", "list", "watch", "patch"]
- apiGroups: ["inference.llmkube.dev"]
  resources: ["inferenceservices"]
  verbs: ["list", "watch"]
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["get", "list", "watch"]
{{- end }}
