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
Where the tls Secret is mounted, read-only.
*/}}
{{- define "lapse.tlsDir" -}}
/etc/lapse/tls
{{- end }}

{{/* Where the Redis Cluster's password Secret is mounted, read-only. */}}
{{- define "lapse.redisPasswordDir" -}}
/etc/lapse/redis
{{- end }}

{{/* True (non-empty) in store.mode embedded: one lapsed, its own store. */}}
{{- define "lapse.embedded" -}}
{{- if eq .Values.store.mode "embedded" }}true{{ end }}
{{- end }}

{{/*
replicas, or its default: 1 with the embedded store (the schema allows no
other), 2 in redis-cluster mode (one pod's loss leaves one serving).
*/}}
{{- define "lapse.replicas" -}}
{{- if kindIs "invalid" .Values.replicas }}{{ ternary 1 2 (eq .Values.store.mode "embedded") }}{{ else }}{{ .Values.replicas }}{{ end }}
{{- end }}

{{/*
podDisruptionBudget.maxUnavailable, or its default: 0 with the embedded store
(a drain waits until you delete the one pod), 1 in redis-cluster mode (a
drain evicts the stateless replicas one at a time).
*/}}
{{- define "lapse.maxUnavailable" -}}
{{- $max := .Values.podDisruptionBudget.maxUnavailable }}
{{- if kindIs "invalid" $max }}{{ ternary 0 1 (eq .Values.store.mode "embedded") }}{{ else }}{{ $max }}{{ end }}
{{- end }}

{{/*
The port of the gRPC probes: the plaintext health port with TLS (the
kubelet's probes cannot speak TLS), else the gRPC port.
*/}}
{{- define "lapse.probePort" -}}
{{- if .Values.tls.enabled }}{{ .Values.tls.healthPort }}{{ else }}{{ .Values.grpcPort }}{{ end }}
{{- end }}

{{/*
Refuses values that only make sense together (the schema checks each value
and the store modes' rules).
*/}}
{{- define "lapse.validate" -}}
{{- if le (int .Values.terminationGracePeriodSeconds) (int .Values.shutdownGraceSeconds) }}
{{- fail (printf "terminationGracePeriodSeconds (%v) must be longer than shutdownGraceSeconds (%v): the kubelet would kill lapsed while it drains" .Values.terminationGracePeriodSeconds .Values.shutdownGraceSeconds) }}
{{- end }}
{{- if and .Values.metrics.enabled (eq (int .Values.metrics.port) (int .Values.grpcPort)) }}
{{- fail (printf "metrics.port (%v) must differ from grpcPort" .Values.metrics.port) }}
{{- end }}
{{- if .Values.tls.enabled }}
{{- if not .Values.tls.secretName }}
{{- fail "tls.enabled needs tls.secretName: a Secret with tls.crt and tls.key (and ca.crt for tls.clientAuth), e.g. a cert-manager Certificate's" }}
{{- end }}
{{- if or (eq (int .Values.tls.healthPort) (int .Values.grpcPort)) (and .Values.metrics.enabled (eq (int .Values.tls.healthPort) (int .Values.metrics.port))) }}
{{- fail (printf "tls.healthPort (%v) must differ from grpcPort and metrics.port" .Values.tls.healthPort) }}
{{- end }}
{{- end }}
{{- if and .Values.autoscaling.enabled (gt (int .Values.autoscaling.minReplicas) (int .Values.autoscaling.maxReplicas)) }}
{{- fail (printf "autoscaling.minReplicas (%v) must not exceed autoscaling.maxReplicas (%v)" .Values.autoscaling.minReplicas .Values.autoscaling.maxReplicas) }}
{{- end }}
{{- end }}

{{/*
lapsed's flags, one per line as a YAML list. The image's entrypoint already
has --listen and --data_dir; these repeat them (a repeated flag wins) so the
pod does not depend on the image's defaults: in redis-cluster mode --data_dir=
turns the image's data directory off.
*/}}
{{- define "lapse.args" -}}
{{- $v := .Values }}
{{- $chartFlags := list "listen" "data_dir" "shutdown" "metrics" "tls" "health" "auth" "store" "redis_nodes" "redis_password" "redis_partitions" "redis_wait" "redis_heartbeat" }}
{{- range $v.extraArgs }}
{{- $name := regexReplaceAll "=.*" (trimPrefix "--" .) "" | replace "-" "_" }}
{{- range $chartFlags }}
{{- if hasPrefix . $name }}
{{- fail (printf "extraArgs: --%s is set by the chart (grpcPort, persistence, shutdownGraceSeconds, metrics, tls, auth, store); use those values" $name) }}
{{- end }}
{{- end }}
{{- end }}
- --listen=0.0.0.0:{{ $v.grpcPort }}
{{- if include "lapse.embedded" . }}
{{- if $v.persistence.enabled }}
- --data_dir={{ include "lapse.dataDir" . }}
- --fsync={{ $v.persistence.fsync }}
- --wal_group_wait={{ $v.persistence.walGroupWait }}
- --snapshot_after_bytes={{ int64 $v.persistence.snapshotAfterBytes }}
- --wal_segment_bytes={{ int64 $v.persistence.walSegmentBytes }}
{{- else }}
- --data_dir=
{{- end }}
- --shards={{ $v.shards }}
{{- else }}
{{- $redis := $v.store.redisCluster }}
- --data_dir=
- --store=redis-cluster
- --redis_nodes={{ join "," $redis.nodes }}
{{- if $redis.password.existingSecret }}
- --redis_password_file={{ include "lapse.redisPasswordDir" . }}/{{ $redis.password.key }}
{{- end }}
- --redis_partitions={{ $redis.partitions }}
- --redis_wait_replicas={{ $redis.waitReplicas }}
- --redis_wait_timeout={{ $redis.waitTimeout }}
- --redis_heartbeat_interval={{ $redis.heartbeatInterval }}
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
- --reserved_fds={{ $v.reservedFds }}
- --event_retention_events={{ int64 $v.retention.events }}
- --event_retention_bytes={{ int64 $v.retention.bytes }}
- --heartbeat_interval={{ $v.watch.heartbeatInterval }}
- --watch_batch_max_events={{ int64 $v.watch.batchMaxEvents }}
- --watch_batch_max_bytes={{ int64 $v.watch.batchMaxBytes }}
- --max_watch_streams={{ int64 $v.watch.maxStreams }}
- --watch_pinned_bytes={{ int64 $v.watch.pinnedBytes }}
- --watch_stall_timeout={{ $v.watch.stallTimeout }}
{{- range $limits := list $v.limits $v.groups }}
{{- range $key, $value := $limits }}
- --{{ snakecase $key }}={{ kindIs "string" $value | ternary $value (int64 $value) }}
{{- end }}
{{- end }}
{{- range $v.extraArgs }}
- {{ . | quote }}
{{- end }}
{{- end }}

{{/*
The pod template of the StatefulSet (embedded) or the Deployment
(redis-cluster): lapsed with the flags above, its probes, and the Secrets it
reads mounted read-only.
*/}}
{{- define "lapse.podTemplate" -}}
{{- $embedded := include "lapse.embedded" . }}
{{- $dataVolume := and $embedded .Values.persistence.enabled }}
{{- $redisPassword := and (not $embedded) .Values.store.redisCluster.password.existingSecret }}
metadata:
  labels:
    {{- include "lapse.labels" . | nindent 4 }}
    {{- with .Values.podLabels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- with .Values.podAnnotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
spec:
  automountServiceAccountToken: false
  enableServiceLinks: false
  terminationGracePeriodSeconds: {{ .Values.terminationGracePeriodSeconds }}
  securityContext:
    {{- toYaml .Values.podSecurityContext | nindent 4 }}
  {{- with .Values.imagePullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.priorityClassName }}
  priorityClassName: {{ . }}
  {{- end }}
  {{- with .Values.nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.affinity }}
  affinity:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  containers:
    - name: lapsed
      image: "{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}"
      imagePullPolicy: {{ .Values.image.pullPolicy }}
      args:
        {{- include "lapse.args" . | trim | nindent 8 }}
      ports:
        - name: grpc
          containerPort: {{ .Values.grpcPort }}
          protocol: TCP
        {{- if .Values.metrics.enabled }}
        - name: metrics
          containerPort: {{ .Values.metrics.port }}
          protocol: TCP
        {{- end }}
        {{- if .Values.tls.enabled }}
        - name: health
          containerPort: {{ .Values.tls.healthPort }}
          protocol: TCP
        {{- end }}
      # gRPC probes take a number, not a port name; with TLS they ask the
      # plaintext health port, as the kubelet's probes cannot speak TLS.
      startupProbe:
        grpc:
          port: {{ include "lapse.probePort" . }}
          service: ""
        {{- toYaml .Values.probes.startup | nindent 8 }}
      livenessProbe:
        grpc:
          port: {{ include "lapse.probePort" . }}
          service: ""
        {{- toYaml .Values.probes.liveness | nindent 8 }}
      # Readiness asks for lapse.v1.LapseService, liveness for the server
      # (""): a lapsed that cannot serve the API (e.g. its disk refuses
      # writes) turns only the former NOT_SERVING, so the pod leaves the
      # Service's endpoints without being restarted.
      readinessProbe:
        grpc:
          port: {{ include "lapse.probePort" . }}
          service: lapse.v1.LapseService
        {{- toYaml .Values.probes.readiness | nindent 8 }}
      resources:
        {{- toYaml .Values.resources | nindent 8 }}
      securityContext:
        {{- toYaml .Values.securityContext | nindent 8 }}
      {{- if or $dataVolume .Values.tls.enabled .Values.auth.existingSecret $redisPassword }}
      volumeMounts:
        {{- if $dataVolume }}
        - name: data
          mountPath: {{ include "lapse.dataDir" . }}
        {{- end }}
        {{- if .Values.tls.enabled }}
        - name: tls
          mountPath: {{ include "lapse.tlsDir" . }}
          readOnly: true
        {{- end }}
        {{- if .Values.auth.existingSecret }}
        # The directory, not a subPath: a subPath mount would not see the
        # Secret's updates, which lapsed picks up by itself.
        - name: auth
          mountPath: /etc/lapse/auth
          readOnly: true
        {{- end }}
        {{- if $redisPassword }}
        - name: redis-password
          mountPath: {{ include "lapse.redisPasswordDir" . }}
          readOnly: true
        {{- end }}
      {{- end }}
  {{- if or .Values.tls.enabled .Values.auth.existingSecret $redisPassword }}
  volumes:
    {{- if .Values.tls.enabled }}
    # The kubelet swaps the files in place when the Secret changes;
    # lapsed re-reads them (--tls_refresh_interval).
    - name: tls
      secret:
        secretName: {{ .Values.tls.secretName }}
        defaultMode: 288  # 0440, written in decimal: YAML 1.2 reads 0440 as 440
    {{- end }}
    {{- with .Values.auth.existingSecret }}
    - name: auth
      secret:
        secretName: {{ . }}
        # Tokens are stored as hashes, but the grants are still nobody
        # else's business: owner and lapsed's group (fsGroup) only.
        defaultMode: 288
    {{- end }}
    {{- if $redisPassword }}
    # A file, not an environment variable: the password stays out of the
    # pod's spec and of `kubectl describe`.
    - name: redis-password
      secret:
        secretName: {{ $redisPassword }}
        defaultMode: 288
    {{- end }}
  {{- end }}
{{- end }}
