# Host-side network and state of the local cluster. Sourced after lib.sh.

# The bridge lc0 carries the node IP, the DNS IP and the pod gateway (the kernel here has no dummy
# interface module). Pod and service CIDRs route only to lc0; forwarding in/out of lc0 to any other
# interface is dropped, so nothing from the cluster reaches beyond this machine.
setup_network() {
  ip link show "$BRIDGE" >/dev/null 2>&1 || ip link add "$BRIDGE" type bridge
  ip link set "$BRIDGE" up
  local a
  for a in "$NODE_IP/32" "$DNS_IP/32" "$POD_GW/${POD_CIDR#*/}"; do
    ip addr show dev "$BRIDGE" | grep -q " inet $a " || ip addr add "$a" dev "$BRIDGE"
  done
  ip route replace "$SERVICE_CIDR" dev "$BRIDGE"
  sysctl -qw net.ipv4.ip_forward=1
  [ -e /proc/sys/net/bridge/bridge-nf-call-iptables ] && sysctl -qw net.bridge.bridge-nf-call-iptables=1
  iptables -w -N MSGBENCH-FORWARD 2>/dev/null || iptables -w -F MSGBENCH-FORWARD
  iptables -w -A MSGBENCH-FORWARD -i "$BRIDGE" -o "$BRIDGE" -j ACCEPT
  iptables -w -A MSGBENCH-FORWARD -i "$BRIDGE" -j DROP
  iptables -w -A MSGBENCH-FORWARD -o "$BRIDGE" -j DROP
  iptables -w -C FORWARD -j MSGBENCH-FORWARD 2>/dev/null || iptables -w -I FORWARD 1 -j MSGBENCH-FORWARD
}

teardown_network() {
  [ -x "$K8S_BIN/kube-proxy" ] && "$K8S_BIN/kube-proxy" --cleanup >/dev/null 2>&1 || true
  while iptables -w -D FORWARD -j MSGBENCH-FORWARD 2>/dev/null; do :; done
  iptables -w -F MSGBENCH-FORWARD 2>/dev/null || true
  iptables -w -X MSGBENCH-FORWARD 2>/dev/null || true
  ip link show "$BRIDGE" >/dev/null 2>&1 && ip link del "$BRIDGE" || true
}

# Kill what a previous cluster left running: pod processes (found through the kubepods cgroups
# this kubelet creates) and the containerd shims of this containerd's k8s.io namespace.
kill_leftover_pods() {
  local f pid
  if [ -d /sys/fs/cgroup/pids/kubepods ]; then
    find /sys/fs/cgroup/pids/kubepods -name cgroup.procs 2>/dev/null | while read -r f; do
      while read -r pid; do kill -KILL "$pid" 2>/dev/null || true; done < "$f"
    done
  fi
  for pid in $(pgrep -f 'containerd-shim-runc-v2 -namespace k8s.io' || true); do
    tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -q -- "-address $CONTAINERD_SOCK" &&
      kill -KILL "$pid" 2>/dev/null || true
  done
}

# Stale state from an earlier session: a fresh cluster starts from empty etcd and kubelet state;
# the image store in /var/lib/containerd is kept (images cannot be pulled again here).
clean_state() {
  kill_leftover_pods
  local m ns
  # Volume mounts of old pods, and rootfs/shm mounts of containers whose shims are gone (only
  # called while containerd is stopped).
  findmnt -rn -o TARGET 2>/dev/null | grep -E "^($KUBELET_DIR|/run/containerd)/" | sort -r | while read -r m; do
    umount -l "$m" 2>/dev/null || true
  done
  rm -rf "$KUBELET_DIR"/{pods,plugins,plugins_registry,pod-resources,checkpoints,device-plugins} \
    "$KUBELET_DIR"/{cpu_manager_state,memory_manager_state,dra_manager_state}
  for ns in /run/netns/cni-*; do
    [ -e "$ns" ] || continue
    umount "$ns" 2>/dev/null || true; rm -f "$ns"
  done
  rm -rf /var/lib/cni/networks/msgbench "$RUNTIME_DIR"
  rm -f "$PIDS"/*.pid
}
