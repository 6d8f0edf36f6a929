{{/* Chart name, truncated to the 63-character label limit. */}}
{{- define "msgbench.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Full name: the release name when it already contains the chart name (release "msgbench"). */}}
{{- define "msgbench.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "msgbench.operatorName" -}}
{{- printf "%s-operator" (include "msgbench.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The leader election Lease, in the release namespace (the Role grants get/patch on it by name). */}}
{{- define "msgbench.leaseName" -}}
{{- include "msgbench.operatorName" . -}}
{{- end -}}

{{/* The Secret holding the key that signs runner control credentials (the operator creates it). */}}
{{- define "msgbench.controlKeyName" -}}
{{- include "msgbench.operatorName" . -}}-control-key
{{- end -}}

{{- define "msgbench.selectorLabels" -}}
app.kubernetes.io/name: {{ include "msgbench.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end -}}

{{- define "msgbench.labels" -}}
{{ include "msgbench.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: msgbench
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "msgbench.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "msgbench.operatorName" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create=false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* An image reference: (dict "root" $ "image" .Values.images.X). images.registry replaces the
image's own registry; an empty tag is the chart's appVersion; a digest pins the content. */}}
{{- define "msgbench.imageRef" -}}
{{- $registry := default .image.registry .root.Values.images.registry -}}
{{- $ref := printf "%s/%s:%s" $registry .image.repository (default .root.Chart.AppVersion .image.tag) -}}
{{- if .image.digest -}}
{{- $ref = printf "%s@%s" $ref .image.digest -}}
{{- end -}}
{{- $ref -}}
{{- end -}}

{{/* The source chart names images no registry serves until a release writes their digests in
(.github/workflows/release.yml) or `make push` fills a registry of one's own: without either, stop
at render time rather than end in ImagePullBackOff. `images.preloaded` says the nodes already hold
the images under their default names (`make images` on the local cluster, `kind load`). */}}
{{- define "msgbench.requireImages" -}}
{{- $images := .Values.images -}}
{{- if not (or $images.registry $images.preloaded) -}}
{{- $missing := list -}}
{{- range $key := list "operator" "benchRunner" "pubsubServer" "nats" "mosquitto" "rumqttd" "sockudo" -}}
{{- if not (index $images $key).digest -}}{{- $missing = append $missing $key -}}{{- end -}}
{{- end -}}
{{- if $missing -}}
{{- fail (printf "images.registry is empty and images.{%s}.digest are not set: this is the source chart, whose images no registry serves. Install the published chart (helm install msgbench oci://ghcr.io/msgbench/charts/msgbench), or build and push the images (make push REGISTRY=registry.example.com/team) and set images.registry=registry.example.com/team (or --values msgbench-images.yaml, which make push writes), or, when the nodes already hold the images under their default names (make images, kind load), set images.preloaded=true" (join "," $missing)) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "msgbench.image" -}}
{{- include "msgbench.requireImages" . -}}
{{- include "msgbench.imageRef" (dict "root" . "image" .Values.images.operator) -}}
{{- end -}}

{{/* The ConfigMap holding operands.yaml: default images and pod additions for runner and server pods. */}}
{{- define "msgbench.operandsName" -}}
{{- printf "%s-operands" (include "msgbench.operatorName" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* One pod-additions block of operands.yaml (runnerPods or serverPods). */}}
{{- define "msgbench.podAdditions" -}}
imagePullSecrets: {{ .root.Values.images.pullSecrets | toJson }}
labels: {{ .pods.labels | toJson }}
annotations: {{ .pods.annotations | toJson }}
{{- with .pods.serviceAccountName }}
serviceAccountName: {{ . | quote }}
{{- end }}
{{- with .pods.priorityClassName }}
priorityClassName: {{ . | quote }}
{{- end }}
{{- end -}}

{{/* "true" when a retention setting is set: the operator then deletes finished runs (RBAC.md
"Retention"). Unset: absent (`--set x=null` removes the key) or null; 0 is a limit. */}}
{{- define "msgbench.retentionSet" -}}
{{- $r := .root.Values.retention | default dict -}}
{{- if and (hasKey $r .key) (not (kindIs "invalid" (index $r .key))) -}}true{{- end -}}
{{- end -}}
{{- define "msgbench.retentionDeletes" -}}
{{- range $k := list "succeededRunsHistoryLimit" "failedRunsHistoryLimit" "deleteAfterSeconds" -}}
{{- include "msgbench.retentionSet" (dict "root" $ "key" $k) -}}
{{- end -}}
{{- end -}}
