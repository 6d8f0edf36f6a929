#!/usr/bin/env bash
# Chart tests: strict lint, render with default and non-default values, assertions on the rendered
# objects (security context, least-privilege RBAC, CRD switch), schema rejections, and mutation
# checks proving the assertions fail when the chart regresses. Offline: needs only helm + python3-yaml.
set -euo pipefail
cd "$(dirname "$0")/.."
source e2e/contract.env  # TOOLS_BIN, where e2e/tools/ensure puts helm and kustomize
export PATH="$TOOLS_BIN:$PATH"
e2e/tools/ensure helm apt:python3-yaml

CHART=charts/msgbench
CHECK=charts/tests/assert_rendered.py
NONDEFAULT=charts/tests/nondefault-values.yaml
# The chart as a release packages it (image digests written in): what users install. The source
# chart alone refuses to render (section 4).
RELEASE=charts/tests/release-values.yaml
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
failed=0
KUBE_VERSION=1.34.4  # the local e2e cluster's version; the chart requires >= 1.30
pass() { echo "ok   - $*"; }
fail() { echo "FAIL - $*" >&2; failed=$((failed + 1)); }

render() { # render <out> [helm args...]
  local out="$1"; shift
  helm template msgbench "$CHART" --namespace msgbench-system --kube-version "$KUBE_VERSION" -f "$RELEASE" "$@" > "$out"
}

# 1. Lint, strict, both value sets.
helm lint --strict --kube-version "$KUBE_VERSION" "$CHART" -f "$RELEASE" >/dev/null && pass "helm lint --strict (default values)" || fail "helm lint --strict (default values)"
helm lint --strict --kube-version "$KUBE_VERSION" "$CHART" -f "$RELEASE" -f "$NONDEFAULT" >/dev/null && pass "helm lint --strict (non-default values)" \
  || fail "helm lint --strict (non-default values)"

# 2. Render and assert. Nothing below means anything when rendering fails, so stop there.
if ! render "$work/default.yaml" || ! render "$work/nondefault.yaml" -f "$NONDEFAULT" \
  || ! render "$work/single.yaml" --set leaderElection.enabled=false \
  || ! render "$work/dashboard.yaml" --set grafana.dashboard.enabled=true; then
  echo "FAIL - helm template failed; chart tests stopped" >&2
  exit 1
fi
python3 "$CHECK" default "$work/default.yaml" "$CHART" && pass "default render assertions" \
  || fail "default render assertions"
python3 "$CHECK" nondefault "$work/nondefault.yaml" "$CHART" && pass "non-default render assertions" \
  || fail "non-default render assertions"
python3 "$CHECK" no-leader-election "$work/single.yaml" "$CHART" && pass "leaderElection.enabled=false render assertions" \
  || fail "leaderElection.enabled=false render assertions"
helm lint --strict --kube-version "$KUBE_VERSION" "$CHART" -f "$RELEASE" --set leaderElection.enabled=false >/dev/null \
  && pass "helm lint --strict (leader election off)" || fail "helm lint --strict (leader election off)"
python3 "$CHECK" dashboard "$work/dashboard.yaml" "$CHART" && pass "grafana.dashboard.enabled=true render assertions" \
  || fail "grafana.dashboard.enabled=true render assertions"
render "$work/faults.yaml" --set faults.enabled=true
python3 "$CHECK" faults "$work/faults.yaml" "$CHART" && pass "faults.enabled=true render assertions (delete on pods, ALLOW_FAULTS)" \
  || fail "faults.enabled=true render assertions"
python3 "$CHECK" default "$work/faults.yaml" "$CHART" 2>/dev/null && fail "assertions catch: delete on pods without faults.enabled" \
  || pass "assertions catch: delete on pods without faults.enabled"
render "$work/faults-network.yaml" --set faults.enabled=true --set faults.network=true
python3 "$CHECK" faults-network "$work/faults-network.yaml" "$CHART" && pass "faults.network=true render assertions (ALLOW_NETWORK_FAULTS)" \
  || fail "faults.network=true render assertions"
python3 "$CHECK" faults "$work/faults-network.yaml" "$CHART" 2>/dev/null && fail "assertions catch: ALLOW_NETWORK_FAULTS without faults.network" \
  || pass "assertions catch: ALLOW_NETWORK_FAULTS without faults.network"
render "$work/faults-power-loss.yaml" --set faults.enabled=true --set faults.powerLoss=true
python3 "$CHECK" faults-power-loss "$work/faults-power-loss.yaml" "$CHART" && pass "faults.powerLoss=true render assertions (ALLOW_POWER_LOSS_FAULTS)" \
  || fail "faults.powerLoss=true render assertions"
python3 "$CHECK" faults "$work/faults-power-loss.yaml" "$CHART" 2>/dev/null && fail "assertions catch: ALLOW_POWER_LOSS_FAULTS without faults.powerLoss" \
  || pass "assertions catch: ALLOW_POWER_LOSS_FAULTS without faults.powerLoss"
render "$work/admission.yaml" --set faults.admissionPolicy.enabled=true
python3 "$CHECK" admission-policy "$work/admission.yaml" "$CHART" \
  && pass "faults.admissionPolicy.enabled=true render assertions (policies, bindings, namespace label)" \
  || fail "faults.admissionPolicy.enabled=true render assertions"
python3 "$CHECK" default "$work/admission.yaml" "$CHART" 2>/dev/null && fail "assertions catch: a ValidatingAdmissionPolicy without faults.admissionPolicy.enabled" \
  || pass "assertions catch: a ValidatingAdmissionPolicy without faults.admissionPolicy.enabled"
render "$work/pod-monitor.yaml" --set runners.podMonitor.enabled=true
python3 "$CHECK" pod-monitor "$work/pod-monitor.yaml" "$CHART" && pass "runners.podMonitor.enabled=true render assertions (PodMonitor on runner pods, port metrics)" \
  || fail "runners.podMonitor.enabled=true render assertions"
python3 "$CHECK" default "$work/pod-monitor.yaml" "$CHART" 2>/dev/null && fail "assertions catch: a PodMonitor without runners.podMonitor.enabled" \
  || pass "assertions catch: a PodMonitor without runners.podMonitor.enabled"
render "$work/no-retention.yaml" --set retention.succeededRunsHistoryLimit=null --set retention.failedRunsHistoryLimit=null
python3 "$CHECK" no-retention "$work/no-retention.yaml" "$CHART" && pass "retention all null render assertions (no delete on benchmarkruns, no settings)" \
  || fail "retention all null render assertions"
python3 "$CHECK" default "$work/no-retention.yaml" "$CHART" 2>/dev/null && fail "assertions catch: retention settings dropped" \
  || pass "assertions catch: retention settings dropped"
render "$work/zero-retention.yaml" --set retention.succeededRunsHistoryLimit=0 --set retention.failedRunsHistoryLimit=null --set retention.deleteAfterSeconds=86400
grep -A1 'SUCCEEDED_RUNS_HISTORY_LIMIT' "$work/zero-retention.yaml" | grep -q 'value: "0"' && ! grep -q FAILED_RUNS_HISTORY_LIMIT "$work/zero-retention.yaml" \
  && grep -A1 'DELETE_RUNS_AFTER_SECONDS' "$work/zero-retention.yaml" | grep -q 'value: "86400"' \
  && pass "retention: a limit of 0 is passed as 0, a null one not at all" || fail "retention: 0 and null limits"
render "$work/pod-logs.yaml" --set results.fromPodLogs=true
python3 "$CHECK" pod-logs "$work/pod-logs.yaml" "$CHART" && pass "results.fromPodLogs=true render assertions (pods/log, RESULTS_FROM_POD_LOGS)" \
  || fail "results.fromPodLogs=true render assertions"
python3 "$CHECK" default "$work/pod-logs.yaml" "$CHART" 2>/dev/null && fail "assertions catch: pods/log without results.fromPodLogs" \
  || pass "assertions catch: pods/log without results.fromPodLogs"
# helm reads no file outside the chart: the dashboard ships as a copy, which must be current.
cmp -s config/dashboards/msgbench-operator.json "$CHART/dashboards/msgbench-operator.json" \
  && pass "chart's dashboard copy equals config/dashboards/msgbench-operator.json" \
  || fail "$CHART/dashboards/msgbench-operator.json is stale: cp config/dashboards/msgbench-operator.json $CHART/dashboards/"
crd_count=$(grep -c '^kind: CustomResourceDefinition' "$work/nondefault.yaml" || true)
[ "$crd_count" = 0 ] && pass "crds.install=false renders no CRD" || fail "crds.install=false rendered $crd_count CRDs"

# One value moves every image: each image reference rendered (the operator's own, and the
# operand defaults in operands.yaml) sits under images.registry. The source chart: `make push`'s way.
helm template msgbench "$CHART" --kube-version "$KUBE_VERSION" --set images.registry=r.example/x > "$work/registry.yaml"
refs=$(python3 - "$work/registry.yaml" <<'PY'
import sys, yaml
docs = [d for d in yaml.load_all(open(sys.argv[1]), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) if d]
refs = [c["image"] for d in docs if d["kind"] == "Deployment" for c in d["spec"]["template"]["spec"]["containers"]]
for d in docs:
    if d["kind"] == "ConfigMap" and "operands.yaml" in d.get("data", {}):
        refs += yaml.load(d["data"]["operands.yaml"], Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))["images"].values()
print("\n".join(refs))
PY
)
if [ "$(echo "$refs" | wc -l)" = 7 ] && ! echo "$refs" | grep -qv '^r\.example/x/'; then
  pass "images.registry=r.example/x puts all 7 images under r.example/x"
else
  fail "images.registry=r.example/x left images elsewhere: $refs"
fi

# 4. The source chart (no digests) renders only with images.registry, and says so otherwise; the
# e2e suite's and `make demo`'s values set it.
if helm template msgbench "$CHART" --kube-version "$KUBE_VERSION" >/dev/null 2>"$work/err"; then
  fail "the source chart rendered without images.registry (no release digests)"
elif grep -q 'images.registry is empty' "$work/err" && grep -q 'make push REGISTRY=' "$work/err" \
  && grep -q 'oci://ghcr.io/msgbench/charts/msgbench' "$work/err" && grep -q 'images.preloaded=true' "$work/err"; then
  pass "the source chart without images.registry fails, saying what to set"
else
  fail "the source chart failed without saying what to set: $(tr '\n' ' ' < "$work/err")"
fi
# One missing digest is enough to refuse (a partly written release), and the message names it.
if helm template msgbench "$CHART" --kube-version "$KUBE_VERSION" -f "$RELEASE" --set images.mosquitto.digest= \
  >/dev/null 2>"$work/err"; then
  fail "a release chart without mosquitto's digest rendered without images.registry"
else
  grep -q 'images.{mosquitto}.digest' "$work/err" && pass "a missing digest is named (images.{mosquitto}.digest)" \
    || fail "a missing digest was not named: $(tr '\n' ' ' < "$work/err")"
fi
e2e_values="$CHART_E2E_VALUES"
helm template msgbench "$CHART" --kube-version "$KUBE_VERSION" -f "$e2e_values" > "$work/e2e.yaml" \
  && grep -q 'image: "ghcr.io/msgbench/operator:0.1.0"' "$work/e2e.yaml" \
  && grep -q 'ghcr.io/msgbench/rumqttd:0.19.0' "$work/e2e.yaml" \
  && pass "the e2e values ($e2e_values) render the source chart, every image under its default name" \
  || fail "the e2e values ($e2e_values) do not render the source chart with the default image names"

# 3. The schema rejects bad values, naming the field.
reject() { # reject <what> <expected text in the error> <helm args...>
  local what="$1" expect="$2"; shift 2
  if helm template msgbench "$CHART" --kube-version "$KUBE_VERSION" -f "$RELEASE" "$@" >/dev/null 2>"$work/err"; then
    fail "schema accepted $what"
  elif grep -q -- "$expect" "$work/err"; then
    pass "schema rejects $what"
  else
    fail "schema rejected $what without naming '$expect': $(tr '\n' ' ' < "$work/err")"
  fi
}
reject "watchNamespace not a DNS label" "watchNamespace" --set watchNamespace=Bad_NS
reject "observeVarz as a string" "observeVarz" --set-string observeVarz=yes
reject "images.pullPolicy: Sometimes" "pullPolicy" --set images.pullPolicy=Sometimes
reject "crds.install: \"yes\"" "install" --set-string crds.install=yes
reject "an unknown top-level key" "notAValue" --set notAValue=1
reject "an unknown nested key" "surprise" --set images.surprise=1
reject "a negative metrics port" "port" --set metrics.service.port=-1
reject "an uppercase image repository" "repository" --set images.operator.repository=GHCR.IO/Operator
reject "images.registry with a scheme" "registry" --set images.registry=https://r.example/x
reject "a digest that is not sha256" "digest" --set images.nats.digest=md5:abc
reject "a runner service account with capitals" "serviceAccountName" --set runnerPods.serviceAccountName=Bench
reject "serviceMonitor.interval without a unit" "interval" --set serviceMonitor.interval=30
reject "resources.requests.cpu garbage" "cpu" --set resources.requests.cpu=lots
reject "replicaCount 4" "replicaCount" --set replicaCount=4
reject "replicaCount 0" "replicaCount" --set replicaCount=0
reject "2 replicas without leader election" "replicaCount" --set replicaCount=2 --set leaderElection.enabled=false
reject "leaderElection.enabled as a string" "enabled" --set-string leaderElection.enabled=yes
reject "grafana.dashboard.enabled as a string" "enabled" --set-string grafana.dashboard.enabled=yes
reject "runners.podMonitor.enabled as a string" "enabled" --set-string runners.podMonitor.enabled=yes
reject "runners.podMonitor.interval without a unit" "interval" --set runners.podMonitor.interval=15
reject "an unknown key under runners" "surprise" --set runners.surprise=1
reject "an empty server fence peer" "clientsFrom" --set-json 'serverPods.networkPolicy.clientsFrom=[{}]'
reject "an ipBlock without a cidr" "cidr" --set-json 'serverPods.networkPolicy.monitoringFrom=[{"ipBlock":{}}]'
reject "grafana.dashboard.namespace not a DNS label" "namespace" --set grafana.dashboard.namespace=Mon_itoring
reject "a negative history limit" "succeededRunsHistoryLimit" --set retention.succeededRunsHistoryLimit=-1
reject "faults.network without faults.enabled" "faults.network needs faults.enabled" --set faults.network=true
reject "faults.powerLoss without faults.enabled" "faults.powerLoss needs faults.enabled" --set faults.powerLoss=true
reject "faults.network as a string" "network" --set-string faults.network=yes
reject "faults.admissionPolicy.namespaceLabel.key with a space" "key" --set "faults.admissionPolicy.namespaceLabel.key=a b"
reject "an unknown key under faults.admissionPolicy" "surprise" --set faults.admissionPolicy.surprise=1

# 4. Mutations: the assertions must catch a regressed chart (otherwise they assert nothing).
mutate() { # mutate <what> <python expression editing docs> ; expects the checker to fail
  local what="$1" edit="$2"
  python3 - "$work/default.yaml" "$work/mutant.yaml" "$edit" <<'PY'
import sys, yaml
docs = [d for d in yaml.load_all(open(sys.argv[1]), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) if d]
dep = next(d for d in docs if d["kind"] == "Deployment")
c = dep["spec"]["template"]["spec"]["containers"][0]
role = next(d for d in docs if d["kind"] == "ClusterRole")
lease_role = next(d for d in docs if d["kind"] == "Role" and d["metadata"]["name"].endswith("-leader-election"))
key_role = next(d for d in docs if d["kind"] == "Role" and d["metadata"]["name"].endswith("-control-key"))
env = {e["name"]: e for e in c["env"]}
exec(sys.argv[3])
yaml.dump_all(docs, open(sys.argv[2], "w"), Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper))
PY
  if python3 "$CHECK" default "$work/mutant.yaml" "$CHART" 2>/dev/null; then
    fail "assertions missed a mutant: $what"
  else
    pass "assertions catch: $what"
  fi
}
mutate "writable root filesystem" 'c["securityContext"]["readOnlyRootFilesystem"] = False'
mutate "capabilities not dropped" 'del c["securityContext"]["capabilities"]'
mutate "no seccomp profile" 'del dep["spec"]["template"]["spec"]["securityContext"]["seccompProfile"]'
mutate "runs as root" 'dep["spec"]["template"]["spec"]["securityContext"]["runAsUser"] = 0'
mutate "wildcard verb" 'role["rules"][0]["verbs"] = ["*"]'
mutate "wildcard resource" 'role["rules"].append({"apiGroups": [""], "resources": ["*"], "verbs": ["get"]})'
mutate "nodes readable" 'role["rules"].append({"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]})'
mutate "pods deletable" 'next(r for r in role["rules"] if "pods" in r["resources"])["verbs"].append("delete")'
mutate "Secrets readable" 'next(r for r in role["rules"] if "secrets" in r["resources"])["verbs"].append("get")'
mutate "secrets readable cluster-wide" 'role["rules"].append({"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]})'
mutate "control key readable under any name" 'del key_role["rules"][0]["resourceNames"]'
mutate "control key Role in another namespace" 'key_role["metadata"]["namespace"] = "default"'
mutate "control key Secret not passed" 'c["env"] = [e for e in c["env"] if e["name"] != "CONTROL_KEY_SECRET"]'
mutate "two operator replicas by default" 'dep["spec"]["replicas"] = 2'
mutate "leader election switched off" 'c["env"] = [e for e in c["env"] if e["name"] != "LEADER_ELECTION"]'
mutate "Lease identity not the pod name" 'env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] = "spec.nodeName"'
mutate "Recreate with leader election" 'dep["spec"]["strategy"] = {"type": "Recreate"}'
mutate "rollout may drop below replicaCount" 'dep["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] = 1'
mutate "lease Role grants update" 'lease_role["rules"][0]["verbs"].append("update")'
mutate "lease get/patch on any Lease" 'del lease_role["rules"][0]["resourceNames"]'
mutate "lease Role in another namespace" 'lease_role["metadata"]["namespace"] = "default"'
mutate "lease Role missing" 'docs.remove(lease_role)'
mutate "PDB with one replica" 'docs.append({"kind": "PodDisruptionBudget", "metadata": {"name": "x", "labels": dep["metadata"]["labels"]}, "spec": {"minAvailable": 1}})'
mutate "readiness probe path" 'c["readinessProbe"]["httpGet"]["path"] = "/"'
mutate "operand images not mounted" 'c["volumeMounts"] = [m for m in c["volumeMounts"] if m["name"] != "operands"]'
mutate "operands.yaml change does not roll the operator" 'del dep["spec"]["template"]["metadata"]["annotations"]["checksum/operands"]'
mutate "a default operand image moved" 'cm = next(d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"].endswith("-operands")); cm["data"]["operands.yaml"] = cm["data"]["operands.yaml"].replace("ghcr.io/msgbench/bench-runner", "docker.io/msgbench/bench-runner")'
mutate "extra CRD rendered" 'docs.append({"kind": "CustomResourceDefinition", "metadata": {"name": "x.msgbench.dev", "annotations": {}}, "spec": {"group": "msgbench.dev"}})'

# The dashboard assertions, on the grafana.dashboard.enabled=true render.
mutate_dashboard() { # mutate_dashboard <what> <python expression editing cm>
  python3 - "$work/dashboard.yaml" "$work/mutant.yaml" "$2" <<'PY'
import sys, yaml
docs = [d for d in yaml.load_all(open(sys.argv[1]), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) if d]
cm = next(d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["labels"].get("grafana_dashboard"))
exec(sys.argv[3])
yaml.dump_all(docs, open(sys.argv[2], "w"), Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper))
PY
  if python3 "$CHECK" dashboard "$work/mutant.yaml" "$CHART" 2>/dev/null; then
    fail "assertions missed a mutant: $1"
  else
    pass "assertions catch: $1"
  fi
}
# The PodMonitor assertions, on the runners.podMonitor.enabled=true render.
mutate_pod_monitor() { # mutate_pod_monitor <what> <python expression editing pm>
  python3 - "$work/pod-monitor.yaml" "$work/mutant.yaml" "$2" <<'PY'
import sys, yaml
docs = [d for d in yaml.load_all(open(sys.argv[1]), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) if d]
pm = next(d for d in docs if d["kind"] == "PodMonitor")
ep = pm["spec"]["podMetricsEndpoints"][0]
exec(sys.argv[3])
yaml.dump_all(docs, open(sys.argv[2], "w"), Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper))
PY
  if python3 "$CHECK" pod-monitor "$work/mutant.yaml" "$CHART" 2>/dev/null; then
    fail "assertions missed a mutant: $1"
  else
    pass "assertions catch: $1"
  fi
}
# The admission policy assertions, on the faults.admissionPolicy.enabled=true render.
mutate_admission() { # mutate_admission <what> <python expression editing docs, vap, binding>
  python3 - "$work/admission.yaml" "$work/mutant.yaml" "$2" <<'PY'
import sys, yaml
docs = [d for d in yaml.load_all(open(sys.argv[1]), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) if d]
vap = next(d for d in docs if d["kind"] == "ValidatingAdmissionPolicy" and d["metadata"]["name"].endswith("-fault-agents"))
runs = next(d for d in docs if d["kind"] == "ValidatingAdmissionPolicy" and d["metadata"]["name"].endswith("-run-faults"))
binding = next(d for d in docs if d["kind"] == "ValidatingAdmissionPolicyBinding" and d["spec"]["policyName"] == vap["metadata"]["name"])
exec(sys.argv[3])
yaml.dump_all(docs, open(sys.argv[2], "w"), Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper))
PY
  if python3 "$CHECK" admission-policy "$work/mutant.yaml" "$CHART" 2>/dev/null; then
    fail "assertions missed a mutant: $1"
  else
    pass "assertions catch: $1"
  fi
}
mutate_admission "policy applies in the labelled namespaces" 'binding["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"][0]["operator"] = "In"'
mutate_admission "binding only audits" 'binding["spec"]["validationActions"] = ["Audit"]'
mutate_admission "MqttBroker not matched" 'vap["spec"]["matchConstraints"]["resourceRules"][0]["resources"] = ["jetstreamclusters"]'
mutate_admission "updates not matched" 'runs["spec"]["matchConstraints"]["resourceRules"][0]["operations"] = ["CREATE"]'
mutate_admission "message without the label" 'runs["spec"]["validations"][0]["message"] = "spec.faults: not here"'
mutate_admission "run policy unbound" 'docs[:] = [d for d in docs if not (d["kind"] == "ValidatingAdmissionPolicyBinding" and d["spec"]["policyName"] == runs["metadata"]["name"])]'
mutate_admission "policy ignores failures" 'vap["spec"]["failurePolicy"] = "Ignore"'

mutate_pod_monitor "PodMonitor scrapes the control port" 'ep["port"] = "agent"'
mutate_pod_monitor "PodMonitor selects server pods" 'pm["spec"]["selector"]["matchLabels"]["app.kubernetes.io/component"] = "server"'
mutate_pod_monitor "PodMonitor only in its own namespace" 'pm["spec"]["namespaceSelector"] = {"matchNames": ["msgbench-system"]}'
mutate_pod_monitor "PodMonitor without the run label" 'ep["relabelings"] = []'
mutate_pod_monitor "PodMonitor missing" 'docs.remove(pm)'

mutate_dashboard "dashboard without the sidecar label" 'del cm["metadata"]["labels"]["grafana_dashboard"]'
mutate_dashboard "dashboard content differs" 'cm["data"]["msgbench-operator.json"] = cm["data"]["msgbench-operator.json"].replace("msgbench_reconcile_total", "msgbench_reconciles", 1)'
mutate_dashboard "dashboard in another namespace" 'cm["metadata"]["namespace"] = "default"'

if [ "$failed" -gt 0 ]; then
  echo "chart tests: $failed failed" >&2
  exit 1
fi
echo "chart tests: all passed"
