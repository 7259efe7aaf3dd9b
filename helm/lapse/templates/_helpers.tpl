{{/* The chart's name, or nameOverride; 63 characters at most (a DNS label). */}}
{{- define "lapse.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The name of every object: fullnameOverride, else the release name, followed by
the chart's name unless the release name already has it. The headless Service
adds "-headless", so 54 characters are left for it.
*/}}
{{- define "lapse.fullname" -}}
{{- $name := include "lapse.name" . }}
{{- $full := .Values.fullnameOverride }}
{{- if not $full }}
{{- $full = ternary .Release.Name (printf "%s-%s" .Release.Name $name) (contains $name .Release.Name) }}
{{- end }}
{{- $full | trunc 54 | trimSuffix "-" }}
{{- end }}

{{- define "lapse.selectorLabels" -}}
app.kubernetes.io/name: {{ include "lapse.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "lapse.labels" -}}
{{ include "lapse.selectorLabels" . }}
app.kubernetes.io/component: server
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end }}

{{/* Where the PersistentVolumeClaim is mounted: --data_dir. */}}
{{- define "lapse.dataDir" -}}
/var/lib/lapse
{{- end }}

{{/*
lapsed's flags, one per line as a YAML list. The image's entrypoint already
has --listen and --data_dir; these repeat them (a repeated flag wins) so the
pod does not depend on the image's defaults.
*/}}
{{/*
Where the tls Secret is mounted, read-only.
*/}}
{{- define "lapse.tlsDir" -}}
/etc/lapse/tls
{{- end }}

{{/*
The port of the gRPC probes: the plaintext health port with TLS (the
kubelet's probes cannot speak TLS), else the gRPC port.
*/}}
{{- define "lapse.probePort" -}}
{{- if .Values.tls.enabled }}{{ .Values.tls.healthPort }}{{ else }}{{ .Values.grpcPort }}{{ end }}
{{- end }}

{{- define "lapse.args" -}}
{{- $v := .Values }}
{{- range $v.extraArgs }}
{{- if or (hasPrefix "--listen" .) (hasPrefix "--data_dir" .) (hasPrefix "--data-dir" .) (hasPrefix "--shutdown" .) (hasPrefix "--metrics" .) (hasPrefix "--tls" .) (hasPrefix "--health" .) (hasPrefix "--auth" .) }}
{{- fail (printf "extraArgs: %s is set by the chart (grpcPort, persistence, shutdownGraceSeconds, metrics, tls, auth); use those values" .) }}
{{- end }}
{{- end }}
- --listen=0.0.0.0:{{ $v.grpcPort }}
{{- if $v.persistence.enabled }}
- --data_dir={{ include "lapse.dataDir" . }}
- --fsync={{ $v.persistence.fsync }}
- --snapshot_after_bytes={{ int64 $v.persistence.snapshotAfterBytes }}
- --wal_segment_bytes={{ int64 $v.persistence.walSegmentBytes }}
{{- else }}
- --data_dir=
{{- end }}
{{- if $v.metrics.enabled }}
- --metrics_listen=0.0.0.0:{{ $v.metrics.port }}
{{- end }}
{{- if $v.tls.enabled }}
- --tls_cert={{ include "lapse.tlsDir" . }}/tls.crt
- --tls_key={{ include "lapse.tlsDir" . }}/tls.key
{{- if $v.tls.clientAuth }}
- --tls_client_ca={{ include "lapse.tlsDir" . }}/ca.crt
{{- end }}
- --tls_refresh_interval={{ $v.tls.refreshInterval }}
- --health_listen=0.0.0.0:{{ $v.tls.healthPort }}
{{- end }}
- --shutdown_grace={{ $v.shutdownGraceSeconds }}s
- --log_level={{ $v.logLevel }}
- --log_format={{ $v.logFormat }}
{{- if $v.auth.existingSecret }}
- --auth_file=/etc/lapse/auth/{{ $v.auth.key }}
{{- end }}
- --shards={{ $v.shards }}
- --event_retention_events={{ int64 $v.retention.events }}
- --event_retention_bytes={{ int64 $v.retention.bytes }}
- --heartbeat_interval={{ $v.watch.heartbeatInterval }}
- --watch_batch_max_events={{ int64 $v.watch.batchMaxEvents }}
- --watch_batch_max_bytes={{ int64 $v.watch.batchMaxBytes }}
{{- range $key, $value := $v.limits }}
- --{{ snakecase $key }}={{ kindIs "string" $value | ternary $value (int64 $value) }}
{{- end }}
{{- range $v.extraArgs }}
- {{ . | quote }}
{{- end }}
{{- end }}
