# smoke netpol: NetworkPolicy is enforced (kind: kube-router; the local cluster's bridge plugin
# enforces nothing, so `smoke` runs this check on kind only unless asked). Sourced by smoke.

smoke_netpol() {
  pod guarded 10m '[]' 'mkdir -p /tmp/www && echo msgbench-smoke-ok > /tmp/www/index.html && exec httpd -f -p 8080 -h /tmp/www'
  k wait pod/guarded --for=condition=Ready --timeout=90s >/dev/null
  local ip; ip="$(k get pod guarded -o jsonpath='{.status.podIP}')"
  # Ingress to the guarded pod only from pods labelled role=friend; everything else denied.
  k apply -f - >/dev/null <<EOF2
{"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"name": "guard"},
 "spec": {"podSelector": {"matchLabels": {"app": "guarded"}}, "policyTypes": ["Ingress"],
  "ingress": [{"from": [{"podSelector": {"matchLabels": {"role": "friend"}}}]}]}}
EOF2
  # The policy is programmed asynchronously: a stranger must be refused within the deadline.
  local n=0 got deadline=$((SECONDS + 60))
  while :; do
    n=$((n + 1)); got="$(netpol_stranger "$ip" "$n")"
    [ "$got" = 0 ] || [ $SECONDS -ge $deadline ] && break
  done
  [ "$got" = 0 ]; check "netpol-deny" $? "a pod the policy does not admit fetched $got page(s) from $ip (want 0)"
  got="$(netpol_friend "$ip")"
  [ "$got" = 1 ]; check "netpol-allow" $? "a pod the policy admits fetched $got page(s) from $ip (want 1)"
}

# Labels must be on the pod before it connects: set them in the manifest, not afterwards.
netpol_stranger() { netpol_pod "stranger-$2" stranger "$1"; }
netpol_friend() { netpol_pod friend friend "$1"; }
netpol_pod() {
  local name="$1" role="$2" ip="$3"
  k run "$name" --image "$TOOLBOX" --restart=Never --labels "role=$role" --image-pull-policy=IfNotPresent \
    --overrides '{"spec": {"automountServiceAccountToken": false, "securityContext": {"runAsNonRoot": true,
      "runAsUser": 65532, "seccompProfile": {"type": "RuntimeDefault"}}}}' \
    --command -- /bin/sh -c "printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 3 $ip 8080 2>/dev/null | grep -c msgbench-smoke-ok || true" >/dev/null
  finished "$name"
}
