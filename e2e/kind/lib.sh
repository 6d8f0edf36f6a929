# What every kind script shares: the contract, and which Docker engine kind talks to. Sourced.
#   KIND_ENGINE=own     e2e/kind/engine: Debian's dockerd in the network namespace $KIND_NETNS,
#                       kind's node image built here (needs root; what `make e2e` on kind needs)
#   KIND_ENGINE=system  the Docker engine `docker` already reaches (a CI runner's), kind's own
#                       node image pulled from its registry
#   KIND_ENGINE=auto    (default) system when such an engine answers, else own
source "$(dirname "${BASH_SOURCE[0]}")/../contract.env"
KIND_DIR="$MSGBENCH_CACHE/kind"
export PATH="$TOOLS_BIN:/usr/local/go/bin:$PATH"
KIND_ENGINE="${KIND_ENGINE:-auto}"
if [ "$KIND_ENGINE" = auto ]; then
  if [ -z "${DOCKER_HOST:-}" ] && command -v docker >/dev/null &&
     timeout 10 docker version --format '{{.Server.Version}}' >/dev/null 2>&1; then
    KIND_ENGINE=system
  else KIND_ENGINE=own; fi
fi
case "$KIND_ENGINE" in
  own)
    export DOCKER_HOST="$KIND_DOCKER_HOST"
    export PATH="$KIND_DIR/engine/usr/bin:$KIND_DIR/engine/usr/sbin:$PATH" ;;
  system) ;;
  *) echo "KIND_ENGINE must be own, system or auto, got '$KIND_ENGINE'" >&2; exit 2 ;;
esac
export KIND_ENGINE
