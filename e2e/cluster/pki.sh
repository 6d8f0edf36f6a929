# Certificates, service-account keys and kubeconfigs, generated once per set of cluster
# addresses (a stamp holds them; a change regenerates everything). Sourced after lib.sh.

pki_stamp() { echo "v1 $NODE_NAME $NODE_IP $API_SERVICE_IP $API_PORT"; }

# sign NAME SUBJECT [SAN]: an ECDSA P-256 key and a certificate signed by the cluster CA.
sign() {
  local name="$1" subj="$2" san="${3:-}" ext
  openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$PKI/$name.key" 2>/dev/null
  openssl req -new -key "$PKI/$name.key" -subj "$subj" -out "$PKI/$name.csr" 2>/dev/null
  ext="$PKI/$name.ext"
  {
    echo "basicConstraints=CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    if [ -n "$san" ]; then echo "extendedKeyUsage=serverAuth,clientAuth"; echo "subjectAltName=$san"
    else echo "extendedKeyUsage=clientAuth"; fi
  } > "$ext"
  openssl x509 -req -in "$PKI/$name.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial \
    -days 3650 -sha256 -extfile "$ext" -out "$PKI/$name.crt" 2>/dev/null
  rm -f "$PKI/$name.csr" "$ext"
}

# kubeconfig FILE CERT_NAME USER: a kubeconfig using client certificate CERT_NAME.
kubeconfig() {
  local file="$1" cert="$2" user="$3"
  cat > "$file" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: msgbench-$CLUSTER
  cluster:
    server: https://$NODE_IP:$API_PORT
    certificate-authority-data: $(base64 -w0 < "$PKI/ca.crt")
users:
- name: $user
  user:
    client-certificate-data: $(base64 -w0 < "$PKI/$cert.crt")
    client-key-data: $(base64 -w0 < "$PKI/$cert.key")
contexts:
- name: msgbench-$CLUSTER
  context: {cluster: msgbench-$CLUSTER, user: $user}
current-context: msgbench-$CLUSTER
EOF
  chmod 600 "$file"
}

ensure_pki() {
  if [ "$(cat "$PKI/.stamp" 2>/dev/null)" = "$(pki_stamp)" ] && [ -s "$PKI/admin.crt" ]; then
    return 0
  fi
  log "generating CA, certificates and service-account keys in $PKI"
  rm -rf "$PKI"; mkdir -p "$PKI"; chmod 700 "$PKI"
  openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$PKI/ca.key" 2>/dev/null
  openssl req -x509 -new -key "$PKI/ca.key" -subj "/CN=msgbench-local-ca" -days 3650 -sha256 \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
    -out "$PKI/ca.crt" 2>/dev/null
  local dns="DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc"
  dns+=",DNS:kubernetes.default.svc.cluster.local,DNS:localhost"
  sign apiserver "/CN=kube-apiserver" "$dns,IP:$NODE_IP,IP:$API_SERVICE_IP,IP:127.0.0.1"
  sign apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client"
  sign admin "/O=system:masters/CN=msgbench-admin"
  sign controller-manager "/CN=system:kube-controller-manager"
  sign scheduler "/CN=system:kube-scheduler"
  sign kubelet-client "/O=system:nodes/CN=system:node:$NODE_NAME"
  sign kubelet-serving "/CN=$NODE_NAME" "DNS:$NODE_NAME,IP:$NODE_IP"
  sign kube-proxy "/CN=system:kube-proxy"
  sign coredns "/CN=msgbench:coredns"
  openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$PKI/sa.key" 2>/dev/null
  openssl pkey -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
  chmod 600 "$PKI"/*.key
  pki_stamp > "$PKI/.stamp"
}

ensure_kubeconfigs() {
  mkdir -p "$CONF" "$(dirname "$KUBECONFIG_OUT")"
  kubeconfig "$KUBECONFIG_OUT" admin msgbench-admin
  kubeconfig "$CONF/controller-manager.kubeconfig" controller-manager system:kube-controller-manager
  kubeconfig "$CONF/scheduler.kubeconfig" scheduler system:kube-scheduler
  kubeconfig "$CONF/kubelet.kubeconfig" kubelet-client "system:node:$NODE_NAME"
  kubeconfig "$CONF/kube-proxy.kubeconfig" kube-proxy system:kube-proxy
  kubeconfig "$CONF/coredns.kubeconfig" coredns msgbench:coredns
}
