# Host-side network and state of the local cluster. Sourced after lib.sh.

# The bridge lc0 carries the node IP and the DNS IP (the kernel here has no dummy interface
# module); pods sit on lcpod0 (the CNI bridge plugin refuses a bridge holding other IPv4
# addresses). Service and pod CIDRs route only to these bridges, forwarding between them and any
# other interface is dropped, and nothing is masqueraded: cluster traffic stays on this machine.
ensure_addr() {  # ensure_addr DEV CIDR
  # (no `ip | grep -q`: under pipefail an early grep exit fails the pipeline)
  case "$(ip -4 -o addr show dev "$1")" in *" inet $2 "*) ;; *) ip addr add "$2" dev "$1" ;; esac
}
ensure_bridge() {
  ip link show "$1" >/dev/null 2>&1 || ip link add "$1" type bridge
  ip link set "$1" up
}

setup_network() {
  ensure_bridge "$BRIDGE"
  ensure_bridge "$POD_BRIDGE"
  ensure_addr "$BRIDGE" "$NODE_IP/32"
  ensure_addr "$BRIDGE" "$DNS_IP/32"
  ensure_addr "$POD_BRIDGE" "$POD_GW/${POD_CIDR#*/}"
  ip route replace "$SERVICE_CIDR" dev "$BRIDGE"
  sysctl -qw net.ipv4.ip_forward=1
  [ -e /proc/sys/net/bridge/bridge-nf-call-iptables ] && sysctl -qw net.bridge.bridge-nf-call-iptables=1
  forward_rules
}

# MSGBENCH-FORWARD: forwarding among lc0 and the pod bridges of nodes 1..NODES only, nothing
# to or from anywhere else. Rebuilt only when that set of bridges changed.
forward_rules() {
  local brs=("$BRIDGE") i a b want rule
  for ((i = 1; i <= NODES; i++)); do brs+=("$(node_pod_bridge "$i")"); done
  want="$(
    for a in "${brs[@]}"; do for b in "${brs[@]}"; do
      echo "-A MSGBENCH-FORWARD -i $a -o $b -j ACCEPT"
    done; done
    for a in "${brs[@]}"; do
      echo "-A MSGBENCH-FORWARD -i $a -j DROP"
      echo "-A MSGBENCH-FORWARD -o $a -j DROP"
    done
  )"
  iptables -w -N MSGBENCH-FORWARD 2>/dev/null || true
  if [ "$(iptables -w -S MSGBENCH-FORWARD | grep '^-A' || true)" != "$want" ]; then
    iptables -w -F MSGBENCH-FORWARD
    while read -r rule; do
      # shellcheck disable=SC2086 # the rule is words
      iptables -w ${rule}
    done <<< "$want"
  fi
  iptables -w -C FORWARD -j MSGBENCH-FORWARD 2>/dev/null || iptables -w -I FORWARD 1 -j MSGBENCH-FORWARD
}

teardown_network() {
  [ -x "$K8S_BIN/kube-proxy" ] && "$K8S_BIN/kube-proxy" --cleanup >/dev/null 2>&1 || true
  while iptables -w -D FORWARD -j MSGBENCH-FORWARD 2>/dev/null; do :; done
  iptables -w -F MSGBENCH-FORWARD 2>/dev/null || true
  iptables -w -X MSGBENCH-FORWARD 2>/dev/null || true
  local b i
  for ((i = 2; i <= MAX_NODES; i++)); do node_traffic "$i" pass; done
  for b in lcpod3 lcpod2 lcpod1 "$POD_BRIDGE" "$BRIDGE"; do
    ip link show "$b" >/dev/null 2>&1 && ip link del "$b" || true
  done
}

# kill_pods SOCKET_REGEX CGROUP_DIR...: SIGKILL every process in the pids cgroups below the
# DIRs (the kubepods trees the kubelets create) and the k8s.io containerd shims whose -address
# matches SOCKET_REGEX and that run in this script's mount namespace: a kind node's shims have
# the same -address (inside the node) and are visible here, but live in the node's namespace.
kill_pods() {
  local sock="$1" d f pid own_mnt
  own_mnt="$(readlink /proc/self/ns/mnt)"
  shift
  for d in "$@"; do
    [ -d "$d" ] || continue
    { find "$d" -name cgroup.procs 2>/dev/null || true; } | while read -r f; do
      while read -r pid; do kill -KILL "$pid" 2>/dev/null || true; done < "$f"
    done
  done
  for pid in $(pgrep -f 'containerd-shim-runc-v2 -namespace k8s.io' || true); do
    [ "$(readlink "/proc/$pid/ns/mnt" 2>/dev/null)" = "$own_mnt" ] || continue
    tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -E -- "-address ($sock) " >/dev/null &&
      kill -KILL "$pid" 2>/dev/null || true
  done
}

# Kill what a previous cluster left running, on every node: node 1's pods sit under the root's
# kubepods, the others' under msgbench-nodeN.
kill_leftover_pods() {
  kill_pods "$CONTAINERD_SOCK|/run/containerd-node[0-9]+/containerd.sock" \
    /sys/fs/cgroup/pids/kubepods /sys/fs/cgroup/pids/msgbench-node*
}

# Stale state from an earlier session: a fresh cluster starts from empty etcd and kubelet state;
# the image store in /var/lib/containerd is kept (images cannot be pulled again here).
clean_state() {
  kill_leftover_pods
  rm -f "$STATIC_POD_DIR"/*  # a test's static pod must not outlive its cluster
  local m ns
  # Volume mounts of old pods, and rootfs/shm mounts of containers whose shims are gone (only
  # called while containerd is stopped).
  { findmnt -rn -o TARGET 2>/dev/null || true; } | { grep -E "^($KUBELET_DIR(-node[0-9]+)?|/run/containerd(-node[0-9]+)?)(/|$)" || true; } |
    sort -r | while read -r m; do umount -l "$m" 2>/dev/null || true; done
  rm -rf "$KUBELET_DIR"/{pods,plugins,plugins_registry,pod-resources,checkpoints,device-plugins} \
    "$KUBELET_DIR"/{cpu_manager_state,memory_manager_state,dra_manager_state} \
    "$KUBELET_DIR"-node[0-9]* /var/lib/cni/networks/msgbench-node[0-9]*
  for ns in /run/netns/cni-*; do
    [ -e "$ns" ] || continue
    umount "$ns" 2>/dev/null || true
    # A name whose mount is covered by a later bind of /run/netns over itself (`ip netns add`,
    # e.g. the kind engine's namespace) cannot be removed ("Device or resource busy"); it names
    # nothing new (CNI names are random) and a reboot clears it.
    rm -f "$ns" 2>/dev/null || log "left $ns: its mount lies beneath a later /run/netns mount"
  done
  # The PV pool's data belongs to the etcd state that is gone with it.
  rm -rf /var/lib/cni/networks/msgbench "$RUNTIME_DIR" "$PV_DIR"
  rm -f "$PIDS"/*.pid
}
