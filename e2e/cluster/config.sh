# Component configuration files, regenerated on every `up` (cheap, and a changed script takes
# effect without manual cleanup). Sourced after lib.sh.

# put FILE < content: replace FILE only when the content differs, and list it in
# CHANGED_CONFIGS. A component that watches its config file (kube-proxy exits when the file is
# rewritten, even with the same bytes) is then touched only when it must restart anyway.
CHANGED_CONFIGS=()
put() {
  local tmp="$1.tmp.$$"
  cat > "$tmp"
  if cmp -s "$tmp" "$1"; then rm -f "$tmp"; else mv -f "$tmp" "$1"; CHANGED_CONFIGS+=("$1"); fi
}
config_changed() {  # config_changed FILE: whether the last write_configs replaced it
  local f
  for f in "${CHANGED_CONFIGS[@]}"; do [ "$f" = "$1" ] && return 0; done
  return 1
}

# Registry hosts directory of every node's containerd (CRI `config_path`): <dir>/<host:port>/hosts.toml
# sets how a registry is reached and trusted (e2e/registry/up writes the local test registry's, with
# its CA). containerd reads it at each pull; changing `config_path` itself needs a containerd restart.
CONTAINERD_HOSTS_DIR="$CACHE/containerd/certs.d"

# containerd_toml ROOT STATE SOCKET CNI_DIR: containerd 1.6 (Debian). This sandbox refuses
# oom_score_adj < 0, so runc must not try it.
containerd_toml() {
  cat <<EOF
version = 2
root = "$1"
state = "$2"
[grpc]
  address = "$3"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  restrict_oom_score_adj = true
  enable_unprivileged_ports = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$4"
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "$CONTAINERD_HOSTS_DIR"
EOF
}

# cni_conflist NETWORK BRIDGE POD_CIDR GATEWAY: pods live on their node's bridge with no
# masquerade: they reach the nodes and each other, nothing else.
cni_conflist() {
  cat <<EOF
{
  "cniVersion": "1.0.0",
  "name": "$1",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$2",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "$3", "gateway": "$4"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}, "snat": false},
    {"type": "loopback"}
  ]
}
EOF
}

# kubelet_yaml NODE_IP SOCKET HEALTHZ_ADDRESS SERVING_CERT_NAME [EXTRA]: a kubelet's config;
# EXTRA lines are appended (a second node's own cgroup root, log dir, ...).
kubelet_yaml() {
  cat <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://$2
address: $1
healthzBindAddress: $3
healthzPort: 10248
readOnlyPort: 0
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $PKI/ca.crt}
authorization: {mode: Webhook}
tlsCertFile: $PKI/$4.crt
tlsPrivateKeyFile: $PKI/$4.key
clusterDomain: cluster.local
clusterDNS: [$DNS_IP]
resolvConf: $CONF/resolv.conf
# Exclusive CPUs for Guaranteed pods with integer CPU requests; CPU 0 stays for the system.
cpuManagerPolicy: static
reservedSystemCPUs: "0"
allowedUnsafeSysctls: [net.core.somaxconn, net.ipv4.tcp_max_syn_backlog]
failSwapOn: false
# Images cannot be pulled again here (no registry): never garbage-collect them, and evict only
# when the machine is really out of room.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: 200Mi, nodefs.available: "2%", imagefs.available: "2%", nodefs.inodesFree: "2%"}
serializeImagePulls: false
maxPods: 110
podPidsLimit: 4096
rotateCertificates: false
EOF
  [ -z "${5:-}" ] || printf '%s\n' "$5"
}

write_configs() {
  mkdir -p "$CONF/cni" "$LOGS" "$STATIC_POD_DIR" "$CONTAINERD_HOSTS_DIR"

  containerd_toml /var/lib/containerd /run/containerd "$CONTAINERD_SOCK" "$CONF/cni" |
    put "$CONF/containerd.toml"
  cni_conflist msgbench "$POD_BRIDGE" "$POD_CIDR" "$POD_GW" | put "$CONF/cni/10-msgbench.conflist"

  # Pod Security admission: enforce nothing by default (like upstream and kind), warn/audit on
  # restricted so non-compliant pods are visible; a namespace may label itself stricter.
  put "$CONF/admission.yaml" <<EOF
apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: PodSecurity
  configuration:
    apiVersion: pod-security.admission.config.k8s.io/v1
    kind: PodSecurityConfiguration
    defaults:
      enforce: privileged
      enforce-version: latest
      warn: restricted
      warn-version: latest
      audit: restricted
      audit-version: latest
    exemptions: {usernames: [], runtimeClasses: [], namespaces: []}
EOF

  # Pods with dnsPolicy Default get only the cluster DNS, never the host's resolvers.
  echo "nameserver $DNS_IP" > "$CONF/resolv.conf"

  kubelet_yaml "$NODE_IP" "$CONTAINERD_SOCK" 127.0.0.1 kubelet-serving "staticPodPath: $STATIC_POD_DIR" |
    put "$CONF/kubelet.yaml"

  put "$CONF/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection: {kubeconfig: $CONF/kube-proxy.kubeconfig}
hostnameOverride: $NODE_NAME
bindAddress: $NODE_IP
clusterCIDR: $CLUSTER_CIDR
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
nodePortAddresses: ["$NODE_IP/32"]
iptables: {localhostNodePorts: false, masqueradeAll: false}
# Leave the host's conntrack sysctls alone.
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
EOF

  # CoreDNS as a host process on the DNS address. No forwarder: names outside the cluster are
  # not resolved, so pods never query resolvers beyond this machine.
  put "$CONF/Corefile" <<EOF
.:53 {
    bind $DNS_IP
    errors
    health 127.0.0.1:$COREDNS_HEALTH_PORT
    ready 127.0.0.1:$COREDNS_READY_PORT
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig $CONF/coredns.kubeconfig
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 5
    }
    cache 5
}
EOF

  # Least privilege for CoreDNS's client certificate (user msgbench:coredns).
  put "$CONF/coredns-rbac.yaml" <<EOF
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "msgbench:coredns"}
rules:
- apiGroups: [""]
  resources: [endpoints, services, pods, namespaces]
  verbs: [list, watch]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "msgbench:coredns"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "msgbench:coredns"}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: "msgbench:coredns"}
EOF
}
