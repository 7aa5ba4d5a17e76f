{{/*
The release's full name: the prefix of every object's name.
*/}}
{{- define "mcp-operator.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 50 | trimSuffix "-" -}}
{{- else if contains "mcp-operator" .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-mcp-operator" .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end }}

{{/*
Labels of every object. app.kubernetes.io/name is always mcp-operator: the
NetworkPolicies the controller writes select the controller and bridge pods by
it and by app.kubernetes.io/component, so it is not overridable.
*/}}
{{- define "mcp-operator.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "mcp-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "mcp-operator.selectorLabels" -}}
app.kubernetes.io/name: mcp-operator
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/*
The manager image: repository@digest, or repository:tag (tag defaults to the
chart's appVersion).
*/}}
{{- define "mcp-operator.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end }}

{{- define "mcp-operator.controllerServiceAccount" -}}
{{ include "mcp-operator.fullname" . }}-controller
{{- end }}

{{- define "mcp-operator.bridgeServiceAccount" -}}
{{ include "mcp-operator.fullname" . }}-bridge
{{- end }}

{{/*
The namespaces the bridge serves: bridge.namespaces, or the release's own.
*/}}
{{- define "mcp-operator.bridgeNamespaces" -}}
{{- if .Values.bridge.namespaces -}}
{{- join "," .Values.bridge.namespaces -}}
{{- else -}}
{{- .Release.Namespace -}}
{{- end -}}
{{- end }}

{{/*
The OTEL_* environment of a container from .Values.tracing: nothing while no
endpoint is set (tracing off). Call with (dict "root" $ "service" "name").
*/}}
{{- define "mcp-operator.tracingEnv" -}}
{{- $t := .root.Values.tracing -}}
{{- if $t.endpoint }}
- name: OTEL_EXPORTER_OTLP_ENDPOINT
  value: {{ $t.endpoint | quote }}
- name: OTEL_EXPORTER_OTLP_PROTOCOL
  value: {{ $t.protocol | quote }}
- name: OTEL_TRACES_SAMPLER
  value: {{ $t.sampler | quote }}
{{- if $t.samplerArg }}
- name: OTEL_TRACES_SAMPLER_ARG
  value: {{ $t.samplerArg | quote }}
{{- end }}
- name: OTEL_SERVICE_NAME
  value: {{ .service | quote }}
{{- end }}
{{- end }}

{{/*
The pod-level settings both Deployments share. Call with
(dict "root" $ "c" .Values.controller).
*/}}
{{- define "mcp-operator.podSettings" -}}
{{- with .root.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml .root.Values.podSecurityContext | nindent 2 }}
{{- with .c.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with .c.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .c.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .c.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/*
The Secret holding the bridge's serving certificate: the one named, or the
one the chart's cert-manager Certificate fills.
*/}}
{{- define "mcp-operator.bridgeTLSSecret" -}}
{{- .Values.bridge.tls.secretName | default (printf "%s-bridge-tls" (include "mcp-operator.fullname" .)) -}}
{{- end -}}
