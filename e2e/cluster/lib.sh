# Shared settings and helpers for e2e/cluster/{up,down,status}. Sourced, not executed.
# One node, everything a host process except pods; node/DNS addresses live on the bridge lc0 and
# pods on the bridge lcpod0, and no cluster traffic ever leaves this machine.

CLUSTER_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# MSGBENCH_CACHE, CLUSTER, CLUSTER_KUBECONFIG, CLUSTER_STATE, STATIC_POD_DIR, NODE_NAME, ...: what
# the Rust harness reads too.
source "$CLUSTER_DIR/../contract.env"
CACHE="$MSGBENCH_CACHE"
KUBECONFIG_OUT="$CLUSTER_KUBECONFIG"
K8S_VERSION="${K8S_VERSION:-v1.34.4}"
K8S_BIN="$CACHE/k8s/$K8S_VERSION/bin"
STATE="$CLUSTER_STATE"          # persistent: certs, configs, logs (kept for failed runs)
PKI="$STATE/pki"
CONF="$STATE/conf"
LOGS="$STATE/logs"
PIDS="$STATE/pids"
# The kubelet's static pod directory (STATIC_POD_DIR, from the contract). Empty in normal use; e2e
# tests that need the kubelet to hold resources the scheduler cannot see (kubelet_refusal's
# OutOfcpu case) drop a manifest there.
RUNTIME_DIR="/dev/shm/msgbench-cluster"   # per boot: etcd data (tmpfs, fast fsync)
KUBELET_DIR="/var/lib/kubelet"
CONTAINERD_SOCK="/run/containerd/containerd.sock"   # default, so plain `ctr -n k8s.io` works

BRIDGE="lc0"                  # node IP, DNS IP, route to the service CIDR
POD_BRIDGE="lcpod0"           # the CNI bridge; pods' gateway (the bridge plugin wants it alone)
NODE_IP="10.250.0.1"
DNS_IP="10.250.0.10"
POD_CIDR="10.244.0.0/24"
POD_GW="10.244.0.1"
CLUSTER_CIDR="10.244.0.0/16"
SERVICE_CIDR="10.96.0.0/16"
API_SERVICE_IP="10.96.0.1"
API_PORT=6443
ETCD_CLIENT_PORT=12379        # not 2379: leave the well-known port to anyone else
ETCD_PEER_PORT=12380
COREDNS_HEALTH_PORT=18053     # CoreDNS defaults to :8080, which pubsub-server tests use
COREDNS_READY_PORT=18054

# Storage: a default StorageClass "local" backed by a fixed pool of hostPath PVs (no dynamic
# provisioner here); e2e/cluster/pv-recycler wipes and frees Released ones (see storage.sh).
# 40: the scenarios (7 file-storage clusters, 21 claims) run beside power_loss (6) and the rest.
PV_DIR="$STATE/pv"
PV_POOL_SIZE="${PV_POOL_SIZE:-40}"
PV_CAPACITY="${PV_CAPACITY:-2Gi}"
PV_POOL_LABEL="msgbench.dev/pv-pool=local"

# Nodes: NODES=1 (the default) is the node above and nothing else; NODES=2..4 adds nodes
# msgbench-local-2.. on this machine (nodes.sh). All share the host's 2 CPUs: placement between
# them is real, performance between them is not.
NODES="${NODES:-1}"
MAX_NODES=4
case "$NODES" in [1-4]) ;; *) echo "cluster: NODES must be 1 to $MAX_NODES, got '$NODES'" >&2; exit 2 ;; esac
node_name() { if [ "$1" = 1 ]; then echo "$NODE_NAME"; else echo "$NODE_NAME-$1"; fi; }
node_ip() { echo "10.250.0.$1"; }        # node 1 is NODE_IP; DNS_IP (.10) is above them all
node_pod_bridge() { echo "lcpod$(($1 - 1))"; }
node_pod_cidr() { echo "10.244.$(($1 - 1)).0/24"; }
node_pod_gw() { echo "10.244.$(($1 - 1)).1"; }
node_containerd_sock() { if [ "$1" = 1 ]; then echo "$CONTAINERD_SOCK"; else echo "/run/containerd-node$1/containerd.sock"; fi; }
node_zone() { local z=(zone-a zone-b zone-c zone-d); echo "${z[$(($1 - 1))]}"; }

# Start order; `down` stops in reverse.
COMPONENTS=(etcd containerd kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy coredns pv-recycler)

export PATH="$K8S_BIN:/usr/local/go/bin:/usr/sbin:/sbin:$PATH"

log() { echo "cluster: $*" >&2; }
die() { echo "cluster: ERROR: $*" >&2; echo "cluster: component logs: $LOGS" >&2; exit 1; }

# pid_of NAME: the pid recorded for NAME if that process still runs the expected binary.
pid_of() {
  local name="$1" pid exe want
  pid="$(cat "$PIDS/$name.pid" 2>/dev/null)" || return 1
  [ -n "$pid" ] && [ -d "/proc/$pid" ] || return 1
  exe="$(tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null)" || return 1
  want="$(binary_of "$name")"
  # The recycler is a script of the checkout: any clone's copy counts (never run two).
  [ "$name" = pv-recycler ] && want="/e2e/cluster/pv-recycler"
  case "$exe" in *"$want"*) echo "$pid" ;; *) return 1 ;; esac
}

binary_of() {
  case "$1" in
    etcd) echo /usr/bin/etcd ;;
    containerd | containerd-node*) echo /usr/bin/containerd ;;
    kubelet-node*) echo "$K8S_BIN/kubelet" ;;
    coredns) echo "$K8S_BIN/coredns" ;;
    pv-recycler) echo "$CLUSTER_DIR/pv-recycler" ;;
    *) echo "$K8S_BIN/$1" ;;
  esac
}

# daemon NAME ARGS...: start NAME in the background (own session), log to $LOGS/NAME.log.
daemon() {
  local name="$1"; shift
  mkdir -p "$LOGS" "$PIDS"
  {
    echo "=== $(date -u +%FT%TZ) starting $name"
    echo "=== $(binary_of "$name") $*"
  } >> "$LOGS/$name.log"
  setsid "$(binary_of "$name")" "$@" >> "$LOGS/$name.log" 2>&1 < /dev/null 9>&- &  # 9: cluster_lock
  echo $! > "$PIDS/$name.pid"
}

# cluster_lock: one up or down at a time. Parallel `make e2e` runs all call up; unserialized, a
# cold start racing a warm one (or a down) leaves duplicate, untracked daemons. Daemons do not
# inherit the lock (daemon closes fd 9).
cluster_lock() {
  mkdir -p "$STATE"
  exec 9>"$STATE/lock"
  flock -n 9 && return 0
  log "waiting for another e2e/cluster/up or down to finish (lock $STATE/lock)"
  flock -w 1800 9 || die "another e2e/cluster/up or down still holds $STATE/lock after 30 min"
}

# stop NAME: SIGTERM, wait up to 10 s, then SIGKILL. Only touches the pid we recorded.
stop() {
  local name="$1" pid i
  pid="$(pid_of "$name")" || { rm -f "$PIDS/$name.pid"; return 0; }
  kill -TERM "$pid" 2>/dev/null || true
  for i in $(seq 100); do [ -d "/proc/$pid" ] || break; sleep 0.1; done
  [ -d "/proc/$pid" ] && kill -KILL "$pid" 2>/dev/null || true
  rm -f "$PIDS/$name.pid"
}

# wait_until SECONDS DESCRIPTION COMMAND...: poll COMMAND every 0.2 s until it succeeds.
wait_until() {
  local timeout="$1" what="$2"; shift 2
  local deadline=$((SECONDS + timeout))
  until "$@" >/dev/null 2>&1; do
    [ "$SECONDS" -lt "$deadline" ] || return 1
    sleep 0.2
  done
  log "ready: $what"
}

# start NAME ARGS...: start NAME unless it already runs.
start() {
  local name="$1"; shift
  pid_of "$name" >/dev/null && return 0
  daemon "$name" "$@"
}
# await NAME SECONDS: until NAME answers its health probe, or die with its log's tail.
await() {
  wait_until "$2" "$1" healthy "$1" || {
    tail -n 30 "$LOGS/$1.log" >&2 || true
    die "$1 not healthy after $2 s (log: $LOGS/$1.log)"
  }
}

kc() { kubectl --kubeconfig "$KUBECONFIG_OUT" --request-timeout=10s "$@"; }

# Health probes, one per component (used by up and status).
healthy() {
  case "$1" in
    etcd) curl -fsS --max-time 2 "http://127.0.0.1:$ETCD_CLIENT_PORT/health" | grep '"health":"true"' >/dev/null ;;
    containerd) ctr --address "$CONTAINERD_SOCK" --timeout 2s version ;;
    kube-apiserver) curl -fsS --max-time 2 --cacert "$PKI/ca.crt" "https://$NODE_IP:$API_PORT/readyz" ;;
    kube-controller-manager) curl -fsSk --max-time 2 https://127.0.0.1:10257/healthz ;;
    kube-scheduler) curl -fsSk --max-time 2 https://127.0.0.1:10259/healthz ;;
    kubelet) curl -fsS --max-time 2 http://127.0.0.1:10248/healthz ;;
    containerd-node*) ctr --address "$(node_containerd_sock "${1#containerd-node}")" --timeout 2s version ;;
    kubelet-node*) curl -fsS --max-time 2 "http://$(node_ip "${1#kubelet-node}"):10248/healthz" ;;
    kube-proxy) curl -fsS --max-time 2 http://127.0.0.1:10256/healthz ;;
    coredns) curl -fsS --max-time 2 "http://127.0.0.1:$COREDNS_READY_PORT/ready" ;;
    pv-recycler) [ "$(kc get pv -l "$PV_POOL_LABEL" --no-headers 2>/dev/null | wc -l)" -ge "$PV_POOL_SIZE" ] ;;
  esac
}
