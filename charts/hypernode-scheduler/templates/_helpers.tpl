{{/*
The chart renders the objects of manifests/install (copied into files/install by
hack/update-manifests.sh, so that there is one source) with the values applied: each
template reads its manifest's objects, moves them to the release's namespace, labels them
and sets what the values change.
*/}}

{{/* The labels Helm's objects carry besides the manifests' own. */}}
{{- define "hypernode.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/part-of: hypernode-scheduler
{{- end }}

{{/* The image of both binaries. */}}
{{- define "hypernode.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/*
hypernode.manifest: the objects of files/install/<file>, as {"items": [...]}: every
namespace that was hypernode-system (the objects' and the bindings' subjects') is the
release's, and every object has the chart's labels. Call with (list $ "<file>").
*/}}
{{- define "hypernode.manifest" -}}
{{- $root := index . 0 -}}
{{- $file := index . 1 -}}
{{- $items := list -}}
{{- range $doc := regexSplit "(?m)^---\\s*$" ($root.Files.Get (printf "files/install/%s" $file)) -1 -}}
{{- $obj := fromYaml $doc -}}
{{- if $obj.kind -}}
{{- if eq ($obj.metadata.namespace | default "") "hypernode-system" -}}
{{- $_ := set $obj.metadata "namespace" $root.Release.Namespace -}}
{{- end -}}
{{- range $s := ($obj.subjects | default list) -}}
{{- if eq ($s.namespace | default "") "hypernode-system" -}}
{{- $_ := set $s "namespace" $root.Release.Namespace -}}
{{- end -}}
{{- end -}}
{{- $_ := set $obj.metadata "labels" (merge ($obj.metadata.labels | default dict) (fromYaml (include "hypernode.labels" $root))) -}}
{{- $items = append $items $obj -}}
{{- end -}}
{{- end -}}
{{- toYaml (dict "items" $items) -}}
{{- end }}

{{/*
hypernode.pod sets a Deployment's replicas, image, verbosity and pod placement from a
component's values. Call with (list $ $deployment $values).
*/}}
{{- define "hypernode.pod" -}}
{{- $root := index . 0 -}}
{{- $d := index . 1 -}}
{{- $v := index . 2 -}}
{{- $_ := set $d.spec "replicas" $v.replicas -}}
{{- $pod := $d.spec.template.spec -}}
{{- $c := index $pod.containers 0 -}}
{{- $_ := set $c "image" (include "hypernode.image" $root) -}}
{{- with $root.Values.image.pullPolicy }}{{ $_ := set $c "imagePullPolicy" . }}{{ end -}}
{{- $command := list -}}
{{- range $arg := $c.command -}}
{{- if hasPrefix "--v=" $arg -}}
{{- $command = append $command (printf "--v=%d" (int $v.verbosity)) -}}
{{- else -}}
{{- $command = append $command $arg -}}
{{- end -}}
{{- end -}}
{{- $_ := set $c "command" $command -}}
{{- $_ := set $c "resources" $v.resources -}}
{{- with $v.nodeSelector }}{{ $_ := set $pod "nodeSelector" . }}{{ end -}}
{{- with $v.tolerations }}{{ $_ := set $pod "tolerations" . }}{{ end -}}
{{- with $v.affinity }}{{ $_ := set $pod "affinity" . }}{{ end -}}
{{- with $v.priorityClassName }}{{ $_ := set $pod "priorityClassName" . }}{{ end -}}
{{- with $root.Values.imagePullSecrets }}{{ $_ := set $pod "imagePullSecrets" . }}{{ end -}}
{{- end }}
