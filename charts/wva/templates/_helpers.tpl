{{/*
Labels helm adds to every object's metadata beside deploy/'s own. Selectors
and pod templates keep deploy/'s labels only, so an upgrade from a
kustomize install does not change immutable selectors.
*/}}
{{- define "wva.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* The wva image: repository@digest, else repository:tag (appVersion by default). */}}
{{- define "wva.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end }}

{{/* A container's image and pull policy. */}}
{{- define "wva.container.image" -}}
image: {{ include "wva.image" . }}
{{- with .Values.image.pullPolicy }}
imagePullPolicy: {{ . }}
{{- end }}
{{- end }}

{{/* The NetworkPolicy peer of Prometheus: its namespace. */}}
{{- define "wva.prometheusPeer" -}}
- namespaceSelector:
    matchLabels:
      kubernetes.io/metadata.name: {{ .Values.networkPolicy.prometheusNamespace }}
{{- end }}
