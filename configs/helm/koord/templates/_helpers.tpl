{{/* Labels every object of the release carries. */}}
{{- define "koord.labels" -}}
app.kubernetes.io/part-of: koord
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end -}}

{{/* Image reference of a component: (list $ .Values.<component>.image). The registry host is optional. */}}
{{- define "koord.image" -}}
{{- $root := index . 0 -}}
{{- $image := index . 1 -}}
{{- if $root.Values.imageRepositoryHost -}}
{{ $root.Values.imageRepositoryHost }}/{{ $image.repository }}:{{ $image.tag }}
{{- else -}}
{{ $image.repository }}:{{ $image.tag }}
{{- end -}}
{{- end -}}

{{/* Feature gates of a component: (list $ .Values.<component>.featureGates), global gates first. */}}
{{- define "koord.featureGates" -}}
{{- $root := index . 0 -}}
{{- list $root.Values.featureGates (index . 1) | compact | join "," -}}
{{- end -}}

{{/* Pod placement of a component (affinity, nodeSelector, tolerations): (list "<koord-app>" .Values.<component>). */}}
{{- define "koord.placement" -}}
{{- $app := index . 0 -}}
{{- $values := index . 1 -}}
affinity:
  podAntiAffinity:
    preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 100
        podAffinityTerm:
          topologyKey: kubernetes.io/hostname
          labelSelector:
            matchExpressions:
              - key: koord-app
                operator: In
                values:
                  - {{ $app }}
{{- with $values.nodeAffinity }}
  nodeAffinity:
    {{- toYaml . | nindent 4 }}
{{- end }}
{{- with $values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* Environment every component reads: its own pod's name and namespace (leader identity, events). */}}
{{- define "koord.podEnv" -}}
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: POD_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
{{- end -}}
