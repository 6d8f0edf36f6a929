# Shared settings of e2e/registry/{up,down,env}. Sourced, not executed.
# A real OCI registry (the CNCF distribution registry, Debian's docker-registry) on 127.0.0.1 only,
# with htpasswd (bcrypt) auth and TLS from a throwaway CA, for tests of pushing msgbench's images
# and chart and of installing from them. Everything lives under $MSGBENCH_CACHE/registry.

source "$(dirname "${BASH_SOURCE[0]}")/../contract.env"
CACHE="$MSGBENCH_CACHE"
REG_DIR="$CACHE/registry"
# The port: REGISTRY_PORT, else the one the last `up` used, else 5443.
REG_PORT="${REGISTRY_PORT:-$(cat "$REG_DIR/port" 2>/dev/null || echo 5443)}"
REG_ADDR="127.0.0.1:$REG_PORT"
REG_USER="msgbench"                        # pushes (make push, make chart-push)
REG_PASSWORD_FILE="$REG_DIR/password"      # random, made once, mode 0600
# Pulls: the credential the cluster's pull Secrets hold, never the pushing one. The distribution
# registry's htpasswd auth gives every user the same rights (no read-only users), so here it is
# only a separate credential; a production registry makes it a read-only robot account.
REG_PULL_USER="msgbench-pull"
REG_PULL_PASSWORD_FILE="$REG_DIR/pull-password"
REG_HTPASSWD="$REG_DIR/htpasswd"
REG_TLS="$REG_DIR/tls"
REG_CA="$REG_TLS/ca.crt"
REG_CA_KEY="$REG_TLS/ca.key"
REG_CERT="$REG_TLS/server.crt"
REG_KEY="$REG_TLS/server.key"
REG_BUNDLE="$REG_TLS/ca-bundle.crt"        # the system CAs + REG_CA (for SSL_CERT_FILE)
REG_CONFIG="$REG_DIR/config.yml"
REG_STORAGE="$REG_DIR/storage"
REG_LOG="$REG_DIR/registry.log"
REG_PID="$REG_DIR/registry.pid"
REG_BIN=/usr/bin/docker-registry
SYSTEM_CAS=/etc/ssl/certs/ca-certificates.crt
# containerd's registry hosts directory (CRI `config_path`, see e2e/cluster/config.sh): the
# cluster's runtimes read <dir>/<host:port>/hosts.toml at every pull.
CONTAINERD_HOSTS_DIR="$CACHE/containerd/certs.d"

reg_log() { echo "registry: $*" >&2; }
reg_die() { echo "registry: ERROR: $*" >&2; exit 1; }

# reg_pid: the pid of the registry this directory started, if it still runs.
reg_pid() {
  local pid cmd
  pid="$(cat "$REG_PID" 2>/dev/null)" || return 1
  [ -n "$pid" ] && [ -d "/proc/$pid" ] || return 1
  cmd="$(tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null)" || return 1
  case "$cmd" in "$REG_BIN serve $REG_CONFIG"*) echo "$pid" ;; *) return 1 ;; esac
}

# reg_status: the HTTP code of an authenticated GET /v2/ (200 when up and healthy).
reg_status() {
  curl -sS -o /dev/null -w '%{http_code}' --max-time 3 --cacert "$REG_CA" \
    -u "$REG_USER:$(cat "$REG_PASSWORD_FILE" 2>/dev/null)" "https://$REG_ADDR/v2/" 2>/dev/null || true
}
reg_healthy() { [ "$(reg_status)" = 200 ]; }
