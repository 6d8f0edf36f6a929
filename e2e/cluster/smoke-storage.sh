# Check 4 of e2e/cluster/smoke (sourced): persistent volumes.

# pvc_pod NAME SCRIPT: a restricted-style non-root toolbox pod with the claim "data" at /data.
pvc_pod() {
  k apply -f - >/dev/null <<EOF
{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "$1"},
 "spec": {
  "restartPolicy": "Never", "automountServiceAccountToken": false,
  "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}],
  "securityContext": {"runAsNonRoot": true, "runAsUser": 65532, "runAsGroup": 65532,
                      "seccompProfile": {"type": "RuntimeDefault"}},
  "containers": [{"name": "main", "image": "$TOOLBOX", "imagePullPolicy": "IfNotPresent",
    "command": ["/bin/sh", "-c", $(printf '%s' "$2" | jq -Rs .)],
    "volumeMounts": [{"name": "data", "mountPath": "/data"}],
    "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"memory": "16Mi"}},
    "securityContext": {"allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true,
                        "capabilities": {"drop": ["ALL"]}}}]}}
EOF
}

smoke_storage() {
  local out pv phase default_sc path
  default_sc="$(kubectl get storageclass -o jsonpath='{range .items[?(@.metadata.annotations.storageclass\.kubernetes\.io/is-default-class=="true")]}{.metadata.name}{"\n"}{end}')"
  k apply -f - >/dev/null <<EOF
{"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data"},
 "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "64Mi"}}}}
EOF
  pvc_pod writer 'id -u; echo "written-by-$(id -u)" > /data/probe && mkdir /data/sub && echo ok > /data/sub/f && cat /data/probe'
  out="$(finished writer)"
  phase="$(k get pvc data -o jsonpath='{.status.phase} {.spec.storageClassName}')"
  pv="$(k get pvc data -o jsonpath='{.spec.volumeName}')"
  [ "$phase" = "Bound $default_sc" ] && [ -n "$default_sc" ]
  check "pvc-binds" $? "claim without storageClassName: $phase (default StorageClass: ${default_sc:-none}), PV ${pv:-none}"
  [ "$(echo "$out" | tail -n 1)" = written-by-65532 ]
  check "pvc-nonroot-write" $? "uid 65532 wrote /data: $(echo "$out" | tr '\n' ' ')"
  pvc_pod reader 'cat /data/probe /data/sub/f'
  out="$(finished reader)"
  [ "$(echo "$out" | tr '\n' ' ')" = "written-by-65532 ok " ]
  check "pvc-persists" $? "a second pod read: $(echo "$out" | tr '\n' ' ')"

  k delete pod writer reader --wait=true --timeout=60s >/dev/null
  k delete pvc data --wait=true --timeout=60s >/dev/null
  # Only the local cluster recycles (kind's local-path provisioner deletes the PV instead).
  [ "${CLUSTER:-local}" = local ] && [ -n "$pv" ] || return 0
  kubectl wait "pv/$pv" --for=jsonpath='{.status.phase}'=Available --timeout=90s >/dev/null
  phase="$(kubectl get pv "$pv" -o jsonpath='{.status.phase} claimRef={.spec.claimRef.name}')"
  path="$(kubectl get pv "$pv" -o jsonpath='{.spec.hostPath.path}')"
  [ "$phase" = "Available claimRef=" ] && [ -d "$path" ] && [ -z "$(ls -A "$path")" ] &&
    [ "$(stat -c %a "$path")" = 777 ]
  check "pv-recycled" $? "after the claim's deletion $pv is $phase; $path holds $(ls -A "$path" 2>/dev/null | wc -l) entries, mode $(stat -c %a "$path" 2>/dev/null)"
}
