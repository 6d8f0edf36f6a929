# Persistent volumes for the local cluster. Sourced after lib.sh.
#
# There is no dynamic provisioner here, so `up` creates a default StorageClass "local"
# (kubernetes.io/no-provisioner, WaitForFirstConsumer) and a fixed pool of hostPath PVs, one
# directory each under $PV_DIR. Their reclaim policy is Retain (the only one a static PV can use
# without a provisioner), so a deleted claim leaves its PV Released; the host daemon pv-recycler
# wipes the directory and removes spec.claimRef, making it Available again. Directories are 0777:
# server pods run as non-root uids (65532, 1883) and fsGroup does not apply to hostPath.

pv_name() { printf 'pv-local-%02d' "$1"; }

# write_storage_manifest: the StorageClass and the PV pool, as one YAML file in $CONF.
write_storage_manifest() {
  local i
  {
    cat <<EOF
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: local
  annotations: {storageclass.kubernetes.io/is-default-class: "true"}
provisioner: kubernetes.io/no-provisioner
volumeBindingMode: WaitForFirstConsumer
reclaimPolicy: Retain
EOF
    for i in $(seq 1 "$PV_POOL_SIZE"); do
      cat <<EOF
---
apiVersion: v1
kind: PersistentVolume
metadata:
  name: $(pv_name "$i")
  labels: {${PV_POOL_LABEL%%=*}: ${PV_POOL_LABEL#*=}}
spec:
  storageClassName: local
  capacity: {storage: $PV_CAPACITY}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  volumeMode: Filesystem
  hostPath: {path: $PV_DIR/$(pv_name "$i"), type: Directory}
  nodeAffinity:
    required:
      nodeSelectorTerms:
      - matchExpressions: [{key: kubernetes.io/hostname, operator: In, values: [$NODE_NAME]}]
EOF
    done
  } > "$CONF/storage.yaml"
}

# ensure_storage: directories, StorageClass and PVs (server-side apply: idempotent, and it never
# touches the claimRef of a bound PV, which this manager does not own).
ensure_storage() {
  local i d
  for i in $(seq 1 "$PV_POOL_SIZE"); do
    d="$PV_DIR/$(pv_name "$i")"
    mkdir -p "$d" && chmod 0777 "$d"
  done
  write_storage_manifest
  kc apply --server-side --force-conflicts --field-manager=msgbench-cluster \
    -f "$CONF/storage.yaml" >/dev/null
}

# pv_pool_summary: e.g. "16 PVs: 4 Bound, 12 Available" (for status).
pv_pool_summary() {
  local phases
  phases="$(kc get pv -l "$PV_POOL_LABEL" -o jsonpath='{range .items[*]}{.status.phase}{"\n"}{end}')" || return 1
  [ -n "$phases" ] || { echo "0 PVs"; return 0; }
  printf '%s PVs: %s\n' "$(echo "$phases" | wc -l)" \
    "$(echo "$phases" | sort | uniq -c | awk '{printf "%s%s %s", sep, $1, $2; sep=", "}')"
}
