# Nodes 2..NODES of the local cluster (NODES=1, the default, has none). Each is a kubelet with
# its own containerd (two kubelets must never share a runtime: each garbage-collects the
# containers it does not know), root dir, pod log dir, cgroup root, node IP on lc0, and pod
# bridge and CIDR, all in this machine's network namespace: one kube-proxy's iptables rules
# serve every node, and each pod CIDR routes through its own bridge. Node 1 runs the control
# plane and is never stopped. Sourced after lib.sh, pki.sh, config.sh, host.sh and
# images/archive.sh.

node_dir() { echo "$CONF/node$1"; }
node_kubelet_dir() { echo "/var/lib/kubelet-node$1"; }
node_cgroup_root() { echo "msgbench-node$1"; }

ensure_node_pki() {  # the node's kubelet client (system:node:NAME) and serving certificates
  local i="$1" name
  name="$(node_name "$i")"
  [ -s "$PKI/kubelet-client-node$i.crt" ] && [ -s "$PKI/kubelet-serving-node$i.crt" ] && return 0
  sign "kubelet-client-node$i" "/O=system:nodes/CN=system:node:$name"
  sign "kubelet-serving-node$i" "/CN=$name" "DNS:$name,IP:$(node_ip "$i")"
  chmod 600 "$PKI"/*.key
}

write_node_configs() {
  local i="$1" d
  d="$(node_dir "$i")"
  mkdir -p "$d/cni"
  containerd_toml "/var/lib/containerd-node$i" "/run/containerd-node$i" \
    "$(node_containerd_sock "$i")" "$d/cni" | put "$d/containerd.toml"
  cni_conflist "msgbench-node$i" "$(node_pod_bridge "$i")" "$(node_pod_cidr "$i")" \
    "$(node_pod_gw "$i")" | put "$d/cni/10-msgbench.conflist"
  # Its own cgroup root and pod log dir: the kubelet creates kubepods/ under the first and
  # removes, from the second, the logs of every pod it does not know.
  kubelet_yaml "$(node_ip "$i")" "$(node_containerd_sock "$i")" "$(node_ip "$i")" \
    "kubelet-serving-node$i" "cgroupRoot: /$(node_cgroup_root "$i")
podLogsDir: /var/log/pods-node$i" | put "$d/kubelet.yaml"
  [ -s "$d/kubelet.kubeconfig" ] ||
    kubeconfig "$d/kubelet.kubeconfig" "kubelet-client-node$i" "system:node:$(node_name "$i")"
}

# The kubelet refuses a cgroup root that does not exist in every hierarchy. A new cpuset
# cgroup starts empty: it gets the parent's CPUs and memory nodes.
node_cgroups() {
  local root h
  root="$(node_cgroup_root "$1")"
  for h in /sys/fs/cgroup/*/; do
    [ -d "$h$root" ] || mkdir "$h$root" 2>/dev/null || true
  done
  h=/sys/fs/cgroup/cpuset
  if [ -d "$h/$root" ] && [ -z "$(cat "$h/$root/cpuset.cpus")" ]; then
    cat "$h/cpuset.cpus" > "$h/$root/cpuset.cpus"
    cat "$h/cpuset.mems" > "$h/$root/cpuset.mems"
  fi
}

node_start() {  # node_start I: node I's runtime and kubelet (idempotent)
  local i="$1" d c ip br
  d="$(node_dir "$i")" ip="$(node_ip "$i")" br="$(node_pod_bridge "$i")"
  ensure_node_pki "$i"
  write_node_configs "$i"
  for c in "containerd-node$i:containerd.toml" "kubelet-node$i:kubelet.yaml"; do
    if config_changed "$d/${c#*:}" && pid_of "${c%%:*}" >/dev/null; then
      log "${c%%:*} config changed: restarting it"
      stop "${c%%:*}"
    fi
  done
  ensure_bridge "$br"
  ensure_addr "$br" "$(node_pod_gw "$i")/${POD_CIDR#*/}"
  ensure_addr "$BRIDGE" "$ip/32"
  node_traffic "$i" pass
  node_cgroups "$i"
  start "containerd-node$i" --config "$d/containerd.toml" --log-level warn
  await "containerd-node$i" 30
  import_archive "$PAUSE_IMAGE" "$CACHE/images/pause-3.10.tar"
  start "kubelet-node$i" --config="$d/kubelet.yaml" --kubeconfig="$d/kubelet.kubeconfig" \
    --root-dir="$(node_kubelet_dir "$i")" --hostname-override="$(node_name "$i")" --node-ip="$ip"
  await "kubelet-node$i" 60
}

# node_stop I: node I goes dark, as a machine that lost power: its traffic is dropped first
# (so not even the kernel's FIN or RST of its dying sockets gets out), then its kubelet stops,
# its pods' processes and container shims are killed, and its runtime stops.
node_stop() {
  local i="$1"
  node_traffic "$i" drop
  stop "kubelet-node$i"
  kill_pods "$(node_containerd_sock "$i")" "/sys/fs/cgroup/pids/$(node_cgroup_root "$i")"
  stop "containerd-node$i"
}

# node_traffic I drop|pass: drop, or pass again, everything to and from node I's pods.
node_traffic() {
  local br rule
  br="$(node_pod_bridge "$1")"
  for rule in "INPUT -i $br" "OUTPUT -o $br" "FORWARD -i $br" "FORWARD -o $br"; do
    # shellcheck disable=SC2086 # the rule is words
    if [ "$2" = drop ]; then
      iptables -w -C $rule -j DROP 2>/dev/null || iptables -w -I ${rule%% *} 1 ${rule#* } -j DROP
    else
      while iptables -w -D $rule -j DROP 2>/dev/null; do :; done
    fi
  done
}

node_present() {  # anything of node I left: a daemon, its Node object, its bridge
  pid_of "kubelet-node$1" >/dev/null || pid_of "containerd-node$1" >/dev/null ||
    ip link show "$(node_pod_bridge "$1")" >/dev/null 2>&1 ||
    kc get node "$(node_name "$1")" >/dev/null 2>&1
}

# node_remove I: node I leaves the cluster (NODES went down): stopped, its Node object deleted
# (its pods go with it), its state, cgroups and bridge removed. Its image store is kept.
node_remove() {
  local i="$1" m d
  log "removing node $(node_name "$i") (NODES=$NODES)"
  node_stop "$i"
  # Its pods are gone with it: deleted now, so their controllers replace them on the nodes
  # left at once (the pod garbage collector would take its quarantine first).
  kc delete pods -A --field-selector "spec.nodeName=$(node_name "$i")" --force --grace-period=0 \
    >/dev/null 2>&1 || true
  kc delete node "$(node_name "$i")" --ignore-not-found --wait=false >/dev/null 2>&1 || true
  d="$(node_kubelet_dir "$i")"
  { findmnt -rn -o TARGET 2>/dev/null || true; } |
    { grep -E "^($d|/run/containerd-node$i)(/|$)" || true; } |
    sort -r | while read -r m; do umount -l "$m" 2>/dev/null || true; done
  # (the kubelet bind-mounts its root dir onto itself: unmounted above, with what is below it)
  rm -rf "$d" "/var/lib/cni/networks/msgbench-node$i" "/var/log/pods-node$i" ||
    log "WARNING: could not remove all of $d (still mounted?)"
  for m in /sys/fs/cgroup/*/"$(node_cgroup_root "$i")"; do
    [ -d "$m" ] && find "$m" -depth -type d -exec rmdir {} + 2>/dev/null || true
  done
  node_traffic "$i" pass
  ip link show "$(node_pod_bridge "$i")" >/dev/null 2>&1 && ip link del "$(node_pod_bridge "$i")"
  ip addr del "$(node_ip "$i")/32" dev "$BRIDGE" 2>/dev/null || true
}

nodes_ready() {
  [ "$(kc get nodes -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' |
    grep -cx True)" -ge "$NODES" ]
}

# ensure_nodes: nodes 2..NODES up, the ones above NODES gone, all Ready and labelled with a
# zone (topology.kubernetes.io/zone: zone-a for node 1, zone-b, ...) for spread rules.
ensure_nodes() {
  local i
  for ((i = 2; i <= MAX_NODES; i++)); do
    if [ "$i" -le "$NODES" ]; then node_start "$i"
    elif node_present "$i"; then node_remove "$i"; fi
  done
  forward_rules
  wait_until 90 "$NODES node(s) Ready" nodes_ready || {
    kc get nodes -o wide >&2 || true; die "not all $NODES nodes Ready"
  }
  for ((i = 1; i <= NODES; i++)); do
    kc label node "$(node_name "$i")" --overwrite "$ZONE_LABEL=$(node_zone "$i")" >/dev/null
  done
}

stop_node_daemons() {  # every node's kubelet and runtime above node 1 (their pods: kill_leftover_pods)
  local i
  for ((i = MAX_NODES; i >= 2; i--)); do
    stop "kubelet-node$i"
    stop "containerd-node$i"
  done
}
