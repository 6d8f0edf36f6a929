# The images a kind node runs, built from binaries on this machine (one-layer docker-archives,
# e2e/images/archive.sh). Sourced by e2e/kind/node-image after rootfs.sh.
PATH_ENV='"PATH=/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin"'
# Images only the node uses: never pulled (imagePullPolicy: Never in the manifests).
KUBE_ROUTER_IMAGE=localhost/msgbench/kube-router
LOCAL_PATH_IMAGE=localhost/msgbench/local-path-provisioner
LOCAL_PATH_HELPER_IMAGE=localhost/msgbench/local-path-helper:busybox

# node_image DEST NAME REF CONFIG FILL: FILL ROOT fills a fresh root, then DEST/NAME.tar.
node_image() {
  local dest="$1" name="$2" ref="$3" cfg="$4" fill="$5" root
  root="$(mktemp -d)"
  rootfs_base "$root"
  add_ca_certs "$root"
  "$fill" "$root"
  image_archive "$ref" "$root" "$dest/$name.tar" "$cfg"
  rm -rf "$root"
}

# The netfilter tools kube-proxy (nftables mode) and kube-router (iptables + ipset) exec, taken
# from the node's own rootfs so their backend and versions match the node's.
add_netfilter() {
  local r="$KIND_DIR/rootfs" t
  for t in /usr/sbin/nft /usr/sbin/ipset /usr/sbin/conntrack /usr/sbin/xtables-nft-multi /usr/bin/ip; do
    add_rootfs_binary "$r" "$1" "$t"
  done
  mkdir -p "$1/usr/lib/x86_64-linux-gnu"
  cp -a "$r/usr/lib/x86_64-linux-gnu/xtables" "$1/usr/lib/x86_64-linux-gnu/"
  for t in iptables iptables-save iptables-restore ip6tables ip6tables-save ip6tables-restore; do
    ln -sfn xtables-nft-multi "$1/usr/sbin/$t"
  done
}

fill_busybox() {
  local a
  add_binary "$1" /bin/busybox /bin/busybox
  for a in $(/bin/busybox --list); do [ -e "$1/bin/$a" ] || ln -s busybox "$1/bin/$a"; done
}

fill_component() { add_binary "$1" "$K8S_BIN/$COMPONENT" "/usr/local/bin/$COMPONENT"; }
fill_proxy() { fill_component "$1"; add_netfilter "$1"; }
fill_etcd() { add_binary "$1" "$BIN/etcd" /usr/local/bin/etcd; }
fill_coredns() { add_binary "$1" "$K8S_BIN/coredns" /coredns; }
fill_router() { add_binary "$1" "$BIN/kube-router" /usr/local/bin/kube-router; add_netfilter "$1"; fill_busybox "$1"; }
fill_local_path() { add_binary "$1" "$BIN/local-path-provisioner" /usr/local/bin/local-path-provisioner; }

# build_node_images DEST: every image kubeadm's control plane and kind's add-ons need. CoreDNS is
# the version build-k8s makes (kind config: dns.imageTag), the sandbox image kind's containerd
# config names (pause:3.10).
build_node_images() {
  local d="$1" c etcd_tag coredns_tag pause
  etcd_tag="$(kubeadm_image etcd)"; coredns_tag="$(cat "$K8S_BIN/.coredns.version")"
  for c in kube-apiserver kube-controller-manager kube-scheduler; do
    COMPONENT="$c" node_image "$d" "$c" "registry.k8s.io/$c:$K8S_VERSION" "{\"Env\":[$PATH_ENV]}" fill_component
  done
  COMPONENT=kube-proxy node_image "$d" kube-proxy "registry.k8s.io/kube-proxy:$K8S_VERSION" \
    "{\"Env\":[$PATH_ENV]}" fill_proxy
  node_image "$d" etcd "registry.k8s.io/etcd:$etcd_tag" "{\"Env\":[$PATH_ENV]}" fill_etcd
  node_image "$d" coredns "registry.k8s.io/coredns/coredns:$coredns_tag" \
    "{\"Entrypoint\":[\"/coredns\"],\"Env\":[$PATH_ENV]}" fill_coredns
  pause="$(pause_archive)"
  cp "$pause" "$d/pause.tar"
  node_image "$d" kube-router "$KUBE_ROUTER_IMAGE:$(cat "$BIN/.kube-router.version")" \
    "{\"Entrypoint\":[\"/usr/local/bin/kube-router\"],\"Env\":[$PATH_ENV]}" fill_router
  node_image "$d" local-path-provisioner "$LOCAL_PATH_IMAGE:$(cat "$BIN/.local-path-provisioner.version")" \
    "{\"Env\":[$PATH_ENV]}" fill_local_path
  node_image "$d" local-path-helper "$LOCAL_PATH_HELPER_IMAGE" "{\"Env\":[$PATH_ENV]}" fill_busybox
}

# kubeadm_image NAME: the tag kubeadm asks for (e.g. etcd 3.6.5-0), so nothing is mis-tagged.
kubeadm_image() {
  "$K8S_BIN/kubeadm" config images list --kubernetes-version "$K8S_VERSION" 2>/dev/null |
    sed -n "s|^registry.k8s.io/$1:||p"
}
