# What every kind script shares: the contract, and the engine's client on PATH talking to the
# engine's socket. Sourced.
source "$(dirname "${BASH_SOURCE[0]}")/../contract.env"
KIND_DIR="$MSGBENCH_CACHE/kind"
export DOCKER_HOST="${DOCKER_HOST:-$KIND_DOCKER_HOST}"
export PATH="$KIND_DIR/engine/usr/bin:$KIND_DIR/engine/usr/sbin:$TOOLS_BIN:/usr/local/go/bin:$PATH"
