# Assemble container images without Docker: a root filesystem directory becomes a one-layer
# docker-archive tar (manifest.json + config JSON + layer tar) that `ctr images import` and
# `kind load image-archive` accept. Output is byte-for-byte reproducible (sorted entries, fixed
# mtimes), so an unchanged image has an unchanged digest and is not imported again. Sourced.
ARCHIVE_SH_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$ARCHIVE_SH_DIR/../contract.env"  # MSGBENCH_CACHE, CLUSTER

# rootfs_base ROOT: /etc/passwd and /etc/group with the non-root users images run as, and /tmp.
rootfs_base() {
  local root="$1"
  chmod 755 "$root"
  mkdir -p "$root/etc" "$root/tmp"
  chmod 1777 "$root/tmp"
  cat > "$root/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/sbin/nologin
mosquitto:x:1883:1883:mosquitto:/mosquitto:/sbin/nologin
nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin
nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin
EOF
  cat > "$root/etc/group" <<'EOF'
root:x:0:
mosquitto:x:1883:
nonroot:x:65532:
nogroup:x:65534:
EOF
}

# add_binary ROOT SRC DEST: copy an executable and every shared library ldd finds for it, at the
# paths the dynamic loader will look them up (a static binary copies alone).
add_binary() {
  local root="$1" src="$2" dest="$3" lib
  [ -x "$src" ] || { echo "images: missing binary $src" >&2; return 1; }
  mkdir -p "$root$(dirname "$dest")"
  cp -L "$src" "$root$dest"
  for lib in $(ldd "$src" 2>/dev/null | grep -o '/[^ ]*' || true); do
    [ -e "$lib" ] || continue
    mkdir -p "$root$(dirname "$lib")"
    cp -L "$lib" "$root$lib"
  done
}

add_ca_certs() {
  mkdir -p "$1/etc/ssl/certs"
  cp -L /etc/ssl/certs/ca-certificates.crt "$1/etc/ssl/certs/ca-certificates.crt"
}

# image_archive REF ROOT OUT CONFIG_JSON: write the docker-archive OUT for image REF from ROOT.
# CONFIG_JSON is the image config's "config" object (Entrypoint, Cmd, User, Env, ...).
image_archive() {
  local ref="$1" root="$2" out="$3" cfg="$4" work layer_sha config_sha
  work="$(mktemp -d)"
  tar --sort=name --mtime=@0 --numeric-owner --format=gnu -C "$root" -cf "$work/layer.tar" .
  layer_sha="$(sha256sum "$work/layer.tar" | cut -d' ' -f1)"
  mkdir "$work/$layer_sha"
  mv "$work/layer.tar" "$work/$layer_sha/layer.tar"
  jq -cn --argjson c "$cfg" --arg d "sha256:$layer_sha" --arg ref "$ref" '{
      architecture: "amd64", os: "linux", config: $c,
      rootfs: {type: "layers", diff_ids: [$d]},
      history: [{created: "1970-01-01T00:00:00Z", created_by: ("msgbench e2e/images/build " + $ref)}]
    }' > "$work/config.json"
  config_sha="$(sha256sum "$work/config.json" | cut -d' ' -f1)"
  mv "$work/config.json" "$work/$config_sha.json"
  jq -cn --arg c "$config_sha.json" --arg ref "$ref" --arg l "$layer_sha/layer.tar" \
    '[{Config: $c, RepoTags: [$ref], Layers: [$l]}]' > "$work/manifest.json"
  mkdir -p "$(dirname "$out")"
  tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner --format=gnu -C "$work" \
    -cf "$out.tmp" manifest.json "$config_sha.json" "$layer_sha"
  mv "$out.tmp" "$out"
  rm -rf "$work"
}

# pause_archive: the pod sandbox image ($PAUSE_IMAGE: e2e/cluster/pause.c built static, since no
# registry is reachable) at $MSGBENCH_CACHE/images/pause-3.10.tar, rebuilt when pause.c changes.
# Prints the path. The local cluster imports it; kind's node image carries it.
pause_archive() {
  local tar="$MSGBENCH_CACHE/images/pause-3.10.tar" src="$ARCHIVE_SH_DIR/../cluster/pause.c" root
  if [ ! -s "$tar" ] || [ "$src" -nt "$tar" ]; then
    root="$(mktemp -d)"
    rootfs_base "$root"
    gcc -static -Os -s -o "$root/pause" "$src"
    image_archive "$PAUSE_IMAGE" "$root" "$tar" '{"Entrypoint":["/pause"],"User":"65535:65535"}'
    rm -rf "$root"
  fi
  echo "$tar"
}

# import_archive REF TAR: load TAR into the cluster's runtime unless that exact archive is already
# there. CLUSTER=local: the k8s.io namespace (what the kubelets use) of every node's containerd;
# CLUSTER=kind: kind (every node).
import_archive() {
  local ref="$1" tar="$2" sum stamps sock n
  sum="$(sha256sum "$tar" | cut -d' ' -f1)"
  stamps="$MSGBENCH_CACHE/images/imported-$CLUSTER"
  if [ "$CLUSTER" = kind ]; then
    local stamp
    stamp="$stamps/$(echo "$ref" | tr '/:' '__')"
    mkdir -p "$stamps"
    [ "$(cat "$stamp" 2>/dev/null)" = "$sum" ] && return 0
    # In a subshell: the kind engine's docker client and socket (e2e/kind/lib.sh).
    (source "$ARCHIVE_SH_DIR/../kind/lib.sh" &&
      kind load image-archive "$tar" --name "${KIND_CLUSTER_NAME:-msgbench}")
    echo "$sum" > "$stamp"
    echo "images: imported $ref" >&2
    return 0
  fi
  # Node 1's runtime at the default address; nodes 2.. (NODES > 1) at their own.
  import_into /run/containerd/containerd.sock "$stamps" "$ref" "$tar" "$sum" || return 1
  for sock in /run/containerd-node*/containerd.sock; do
    [ -S "$sock" ] || continue
    n="${sock#/run/containerd-}"
    ctr --address "$sock" --timeout 2s version >/dev/null 2>&1 || continue
    import_into "$sock" "$stamps-${n%%/*}" "$ref" "$tar" "$sum" || return 1
  done
}

# import_into SOCKET STAMP_DIR REF TAR SHA256
import_into() {
  local sock="$1" ref="$3" tar="$4" sum="$5" stamp present where=""
  [ "$sock" = /run/containerd/containerd.sock ] || where=" ($sock)"
  stamp="$2/$(echo "$ref" | tr '/:' '__')"
  mkdir -p "$2"
  # Trust the stamp only if containerd still holds the image it recorded.
  # Pinned: nothing here can pull an image again, so the kubelet must never garbage-collect
  # one (under disk pressure it would, pinned images excepted).
  present="$(ctr --address "$sock" -n k8s.io images ls -q "name==$ref" 2>/dev/null || true)"
  if [ -n "$present" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$sum" ]; then
    ctr --address "$sock" -n k8s.io images label "$ref" io.cri-containerd.pinned=pinned >/dev/null
    return 0
  fi
  ctr --address "$sock" -n k8s.io images import "$tar" >/dev/null
  ctr --address "$sock" -n k8s.io images ls -q "name==$ref" | grep -x "$ref" >/dev/null ||
    { echo "images: $ref not present after import ($sock)" >&2; return 1; }
  ctr --address "$sock" -n k8s.io images label "$ref" io.cri-containerd.pinned=pinned >/dev/null
  echo "$sum" > "$stamp"
  echo "images: imported $ref$where" >&2
}
