#!/usr/bin/env python3
"""Assertions on `helm template` output. Usage: assert_rendered.py <case> <rendered.yaml> <chart dir>.

Each check appends to FAILURES with the object and the rule it broke; exit status 1 when any failed.
"""
import json
import os
import re
import sys

import yaml

# libyaml\'s parser when present: the CRDs are ~370 KB, ~1 s each in pure Python.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

FAILURES = []


def check(ok, msg):
    if not ok:
        FAILURES.append(msg)


def by_kind(docs, kind):
    return [d for d in docs if d.get("kind") == kind]


def one(docs, kind):
    found = by_kind(docs, kind)
    check(len(found) == 1, f"expected exactly one {kind}, found {len(found)}")
    return found[0] if found else {}


def check_security(dep):
    pod = dep.get("spec", {}).get("template", {}).get("spec", {})
    psc = pod.get("securityContext", {})
    check(psc.get("runAsNonRoot") is True, "pod securityContext.runAsNonRoot must be true")
    check(isinstance(psc.get("runAsUser"), int) and psc["runAsUser"] != 0, "pod must run as a non-zero uid")
    check(psc.get("seccompProfile", {}).get("type") == "RuntimeDefault", "pod seccompProfile must be RuntimeDefault")
    check(pod.get("automountServiceAccountToken") is True, "operator pod must opt in to its token")
    check(pod.get("hostNetwork") is not True and pod.get("hostPID") is not True, "no host namespaces")
    containers = pod.get("containers", [])
    check(len(containers) == 1, "operator pod has one container")
    for c in containers:
        sc = c.get("securityContext", {})
        name = c.get("name")
        check(sc.get("readOnlyRootFilesystem") is True, f"container {name}: readOnlyRootFilesystem must be true")
        check(sc.get("allowPrivilegeEscalation") is False, f"container {name}: allowPrivilegeEscalation must be false")
        check(sc.get("privileged") is not True, f"container {name}: must not be privileged")
        check(sc.get("capabilities", {}).get("drop") == ["ALL"], f"container {name}: capabilities.drop must be [ALL]")
        check(not sc.get("capabilities", {}).get("add"), f"container {name}: must add no capabilities")
        probes = {p: c.get(p, {}).get("httpGet", {}) for p in ("livenessProbe", "readinessProbe")}
        check(probes["livenessProbe"].get("path") == "/healthz", f"container {name}: liveness probe on /healthz")
        check(probes["readinessProbe"].get("path") == "/readyz", f"container {name}: readiness probe on /readyz")
        ports = {p.get("name"): p.get("containerPort") for p in c.get("ports", [])}
        check(ports.get(probes["livenessProbe"].get("port")) == 8080, f"container {name}: probes on port 8080")
        res = c.get("resources", {})
        check(bool(res.get("requests", {}).get("cpu")) and bool(res.get("requests", {}).get("memory")),
              f"container {name}: cpu and memory requests must be set")
        check(bool(res.get("limits", {}).get("memory")), f"container {name}: memory limit must be set")


def triples_of(repo, heading):
    """(group, resource, verb) from a 4-column table (apiGroup, resources, verbs, used for) of
    operator/RBAC.md under `heading`, or None when RBAC.md does not exist."""
    path = os.path.join(repo, "operator", "RBAC.md")
    if not os.path.exists(path):
        return None
    triples = set()
    for cells in section_rows(path, heading, 4):
        group = "" if cells[0].startswith('""') else cells[0].strip("`")
        for r in cells[1].split(","):
            for v in cells[2].split(","):
                triples.add((group, r.strip().strip("`"), v.strip().strip("`")))
    return triples


def rbac_md_grants(repo):
    return triples_of(repo, "## Cluster-wide")


LEASE_ROLE_SUFFIX = "-leader-election"


def rbac_md_lease_grants(repo):
    """(group, resource, verb, limited_by_name) from operator/RBAC.md's leader election table."""
    path = os.path.join(repo, "operator", "RBAC.md")
    if not os.path.exists(path):
        return None
    grants = set()
    for cells in section_rows(path, "## Leader election", 4):
        by_name = not cells[2].startswith("(any")
        for r in cells[1].split(","):
            for v in cells[3].split(","):
                grants.add((cells[0], r.strip(), v.strip(), by_name))
    return grants


def is_lease_role(d):
    return d.get("metadata", {}).get("name", "").endswith(LEASE_ROLE_SUFFIX)


def check_lease_rbac(docs, repo, dep, env, enabled):
    """Leader election: a Role in the release namespace for exactly the operator's own Lease."""
    roles = [d for d in by_kind(docs, "Role") if is_lease_role(d)]
    bindings = [d for d in by_kind(docs, "RoleBinding") if is_lease_role(d)]
    if not enabled:
        check(not roles and not bindings, "leader election off: no lease Role")
        return
    check(len(roles) == 1 and len(bindings) == 1, f"leader election: one lease Role and binding, found {len(roles)}/{len(bindings)}")
    if not roles:
        return
    ns = dep.get("metadata", {}).get("namespace")
    check(roles[0]["metadata"].get("namespace") == ns, "lease Role lives in the operator's namespace")
    check(bindings and bindings[0]["metadata"].get("namespace") == ns, "lease RoleBinding in the operator's namespace")
    check(bindings and bindings[0].get("roleRef", {}).get("name") == roles[0]["metadata"]["name"], "lease RoleBinding binds the lease Role")
    lease = env.get("LEADER_ELECTION_LEASE")
    rendered = set()
    for rule in roles[0].get("rules", []):
        names = rule.get("resourceNames")
        check(names in (None, [lease]), f"lease Role: resourceNames must be exactly the Lease {lease}: {rule}")
        for g in rule.get("apiGroups", []):
            for r in rule.get("resources", []):
                for v in rule.get("verbs", []):
                    rendered.add((g, r, v, bool(names)))
    documented = rbac_md_lease_grants(repo)
    if documented is not None:
        check(rendered == documented,
              f"lease Role differs from operator/RBAC.md: extra {sorted(rendered - documented)}, "
              f"missing {sorted(documented - rendered)}")
    # Least privilege beyond the table: reading or updating someone else's Lease is never granted.
    for g, r, v, by_name in rendered:
        check(by_name or v == "create", f"lease Role: {v} on {r} must be limited to the Lease by name")


def section_rows(path, heading, columns):
    """The cells of each table row with `columns` cells under `heading` in a Markdown file."""
    inside = False
    for line in open(path):
        if line.startswith("## "):
            inside = line.strip() == heading
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if inside and len(cells) == columns and cells[0] not in ("apiGroup", "---") \
                and not set(cells[0]) <= {"-"}:
            yield cells


def rbac_md_fault_grants(repo):
    return triples_of(repo, "## Fault injection") or set()


def rbac_md_log_grants(repo):
    return triples_of(repo, "## Results from pod logs") or set()


def rbac_md_retention_grants(repo):
    return triples_of(repo, "## Retention") or set()


CONTROL_KEY_ROLE_SUFFIX = "-control-key"


def is_own_namespace_role(d):
    """The Roles in the operator's own namespace: its Lease and its control key."""
    name = d.get("metadata", {}).get("name", "")
    return name.endswith(LEASE_ROLE_SUFFIX) or name.endswith(CONTROL_KEY_ROLE_SUFFIX)


def check_control_key_rbac(docs, repo, dep, env):
    """The one Secret the operator reads: its control key, by name, in its own namespace."""
    roles = [d for d in by_kind(docs, "Role") if d["metadata"]["name"].endswith(CONTROL_KEY_ROLE_SUFFIX)]
    bindings = [d for d in by_kind(docs, "RoleBinding") if d["metadata"]["name"].endswith(CONTROL_KEY_ROLE_SUFFIX)]
    check(len(roles) == 1 and len(bindings) == 1, f"one control-key Role and binding, found {len(roles)}/{len(bindings)}")
    if not roles:
        return
    ns = dep.get("metadata", {}).get("namespace")
    check(roles[0]["metadata"].get("namespace") == ns, "control-key Role lives in the operator's namespace")
    check(bindings and bindings[0]["metadata"].get("namespace") == ns, "control-key RoleBinding in the operator's namespace")
    check(bindings and bindings[0].get("roleRef", {}).get("name") == roles[0]["metadata"]["name"],
          "control-key RoleBinding binds the control-key Role")
    key = env.get("CONTROL_KEY_SECRET")
    check(bool(key), "CONTROL_KEY_SECRET set: runs survive an operator restart")
    rendered = set()
    for rule in roles[0].get("rules", []):
        names = rule.get("resourceNames")
        check(names in (None, [key]), f"control-key Role: resourceNames must be exactly {key}: {rule}")
        for r in rule.get("resources", []):
            for v in rule.get("verbs", []):
                check(bool(names) or v == "create", f"control-key Role: {v} on {r} must be limited to the key by name")
                rendered.add((r, v, bool(names)))
    path = os.path.join(repo, "operator", "RBAC.md")
    if os.path.exists(path):
        documented = set()
        for cells in section_rows(path, "## Runner control key", 5):
            for r in cells[1].split(","):
                for v in cells[3].split(","):
                    documented.add((r.strip(), v.strip(), not cells[2].startswith("(any")))
        check(rendered == documented,
              f"control-key Role differs from operator/RBAC.md: extra {sorted(rendered - documented)}, "
              f"missing {sorted(documented - rendered)}")


def check_rbac(docs, repo, faults=False, pod_logs=False, retention=True):
    roles = [d for d in by_kind(docs, "ClusterRole") + by_kind(docs, "Role") if not is_own_namespace_role(d)]
    check(len(roles) == 1, f"one (Cluster)Role for the operator, found {len(roles)}")
    granted = {}
    for role in roles:
        rname = role["metadata"]["name"]
        for rule in role.get("rules", []):
            for field in ("apiGroups", "resources", "verbs"):
                check("*" not in rule.get(field, []), f"{role['kind']} {rname}: wildcard in {field}: {rule}")
            check("nonResourceURLs" not in rule, f"{role['kind']} {rname}: no nonResourceURLs")
            for g in rule.get("apiGroups", []):
                for r in rule.get("resources", []):
                    granted.setdefault((g, r), set()).update(rule.get("verbs", []))
    for (g, r), verbs in granted.items():
        check(r not in ("nodes", "clusterroles", "clusterrolebindings", "roles", "rolebindings",
                        "serviceaccounts", "serviceaccounts/token", "pods/exec", "pods/attach",
                        "pods/portforward", "pods/ephemeralcontainers", "customresourcedefinitions"),
              f"RBAC grants {sorted(verbs)} on sensitive resource {g or 'core'}/{r}")
        check(not ({"escalate", "bind", "impersonate"} & verbs), f"RBAC grants escalate/bind/impersonate on {r}")
    # No Secret read outside the operator's own namespace (check_control_key_rbac): the wide role
    # may only create them (JetStream route passwords). Pod logs only opted in.
    check(granted.get(("", "secrets"), {"create"}) == {"create"},
          f"Secrets only created in the operator's wide role: {granted.get(('', 'secrets'))}")
    check((("", "pods/log") in granted) == pod_logs, f"pods/log exactly when results.fromPodLogs ({pod_logs})")
    pods_allowed = {"get", "list", "watch"} | ({"delete"} if faults else set())
    check(granted.get(("", "pods"), set()) <= pods_allowed,
          "pods must be read-only (delete only with faults.enabled)")
    check(("delete" in granted.get(("", "pods"), set())) == faults,
          f"delete on pods exactly when faults.enabled ({faults})")
    for kind in ("jetstreamclusters", "mqttbrokers", "pubsubservers"):
        check({"list", "watch"} <= granted.get(("msgbench.dev", kind), set()), f"RBAC: watch {kind}")
        check("patch" in granted.get(("msgbench.dev", f"{kind}/status"), set()), f"RBAC: patch {kind}/status")
        check("delete" not in granted.get(("msgbench.dev", kind), set()), f"RBAC: operator must not delete {kind}")
    for g, r in (("", "configmaps"), ("", "services"), ("apps", "statefulsets"), ("apps", "deployments"),
                 ("policy", "poddisruptionbudgets")):
        check({"list", "watch", "create", "patch", "delete"} <= granted.get((g, r), set()),
              f"RBAC: manage children {g or 'core'}/{r}")
    check({"create", "patch"} <= granted.get(("events.k8s.io", "events"), set()), "RBAC: emit events")
    # The chart grants exactly what the operator documents it uses.
    documented = rbac_md_grants(repo)
    if documented is not None and faults:
        documented = documented | rbac_md_fault_grants(repo)
    if documented is not None and pod_logs:
        documented = documented | rbac_md_log_grants(repo)
    if documented is not None and retention:
        documented = documented | rbac_md_retention_grants(repo)
    check(("delete" in granted.get(("msgbench.dev", "benchmarkruns"), set())) == retention,
          f"delete on benchmarkruns exactly when a retention setting is set ({retention})")
    if documented is not None:
        rendered = {(g, r, v) for (g, r), verbs in granted.items() for v in verbs}
        check(rendered == documented,
              f"chart RBAC differs from operator/RBAC.md: extra {sorted(rendered - documented)}, "
              f"missing {sorted(documented - rendered)}")
    for b in by_kind(docs, "ClusterRoleBinding") + by_kind(docs, "RoleBinding"):  # lease binding too
        subjects = b.get("subjects", [])
        check(len(subjects) == 1 and subjects[0].get("kind") == "ServiceAccount",
              f"{b['kind']} {b['metadata']['name']}: binds only the operator's ServiceAccount")


def dashboards(docs):
    return [d for d in by_kind(docs, "ConfigMap")
            if d.get("metadata", {}).get("labels", {}).get("grafana_dashboard") == "1"]


def check_dashboard(docs, repo, namespace):
    """One ConfigMap for the Grafana sidecar carrying exactly config/dashboards/msgbench-operator.json."""
    found = dashboards(docs)
    check(len(found) == 1, f"one ConfigMap labelled grafana_dashboard=1, found {len(found)}")
    if not found:
        return
    cm = found[0]
    check(cm["metadata"].get("namespace") == namespace, f"dashboard ConfigMap in {namespace}, got {cm['metadata'].get('namespace')}")
    data = cm.get("data") or {}
    check(list(data) == ["msgbench-operator.json"], f"dashboard ConfigMap data keys {list(data)}")
    with open(os.path.join(repo, "config", "dashboards", "msgbench-operator.json")) as f:
        source = json.load(f)
    try:
        shipped = json.loads(data.get("msgbench-operator.json", ""))
    except ValueError as e:
        shipped = f"not JSON: {e}"
    check(shipped == source, "the dashboard ConfigMap differs from config/dashboards/msgbench-operator.json")


def rust_const(repo, rel, name):
    """The string value of `pub const NAME: &str = "…";` in a Rust source of the repo."""
    with open(os.path.join(repo, rel)) as f:
        m = re.search(rf'pub const {name}: &str = "([^"]*)";', f.read())
    check(m is not None, f"{rel}: no string constant {name}")
    return m.group(1) if m else None


def runner_pod_labels(repo):
    """The labels the operator gives every runner pod, read from the Rust sources."""
    meta = "operator-core/src/meta.rs"
    return {
        rust_const(repo, meta, "LABEL_NAME"): rust_const(repo, "operator-core/src/run/identity.rs", "KIND_LABEL"),
        rust_const(repo, meta, "LABEL_COMPONENT"): "runner",
        rust_const(repo, meta, "LABEL_MANAGED_BY"): rust_const(repo, meta, "MANAGED_BY"),
    }


def check_pod_monitor(docs, repo, namespace_selector, labels=None):
    """One PodMonitor selecting the runner pods by the operator's labels, scraping port `metrics`
    (runner_api::agent::METRICS_PORT_NAME) and labelling series with their run."""
    pm = one(docs, "PodMonitor")
    spec = pm.get("spec", {})
    check(pm.get("apiVersion") == "monitoring.coreos.com/v1", "PodMonitor apiVersion monitoring.coreos.com/v1")
    check(pm.get("metadata", {}).get("namespace") == "msgbench-system", "PodMonitor in the release namespace")
    want = runner_pod_labels(repo)
    got = spec.get("selector", {}).get("matchLabels")
    check(got == want, f"PodMonitor selects runner pods by {want}, got {got}")
    check(spec.get("namespaceSelector") == namespace_selector,
          f"PodMonitor namespaceSelector {namespace_selector}, got {spec.get('namespaceSelector')}")
    port_name = rust_const(repo, "runner-api/src/agent.rs", "METRICS_PORT_NAME")
    endpoints = spec.get("podMetricsEndpoints") or [{}]
    check(len(endpoints) == 1 and endpoints[0].get("port") == port_name and endpoints[0].get("path") == "/metrics",
          f"PodMonitor scrapes port {port_name} /metrics, got {endpoints}")
    relabel = {r.get("targetLabel"): r.get("sourceLabels") for r in endpoints[0].get("relabelings", [])}
    check(relabel.get("run") == ["__meta_kubernetes_pod_label_app_kubernetes_io_instance"],
          f"PodMonitor labels series with the run's name (run), got {relabel}")
    for k, v in (labels or {}).items():
        check(pm.get("metadata", {}).get("labels", {}).get(k) == v, f"runners.podMonitor.labels {k}={v} honoured")


def crd_spec_fields(repo, plural):
    """The `spec` properties of CRD `<plural>.msgbench.dev` as crdgen writes it (crds/yaml)."""
    with open(os.path.join(repo, "crds", "yaml", f"{plural}.msgbench.dev.yaml")) as f:
        crd = yaml.load(Loader=_LOADER, stream=f)
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema["properties"]["spec"]["properties"]


def check_fault_admission(docs, repo, key, value):
    """faults.admissionPolicy: two ValidatingAdmissionPolicies, each bound with Deny to the
    namespaces lacking label key=value, refusing server fault agents and run faults; the fields
    their CEL reads exist in the CRDs."""
    label = f"{key}={value}"
    policies = {d["metadata"]["name"]: d for d in by_kind(docs, "ValidatingAdmissionPolicy")}
    bindings = by_kind(docs, "ValidatingAdmissionPolicyBinding")
    check(len(policies) == 2 and len(bindings) == 2, f"two policies and two bindings, got {len(policies)}, {len(bindings)}")
    wanted = {"fault-agents": (["jetstreamclusters", "mqttbrokers"], "object.spec.faultInjection", "spec.faultInjection"),
              "run-faults": (["benchmarkruns"], "object.spec.faults", "spec.faults")}
    for suffix, (resources, reads, field) in wanted.items():
        name = next((n for n in policies if n.endswith("-" + suffix)), None)
        check(name is not None, f"a ValidatingAdmissionPolicy *-{suffix}")
        spec = policies.get(name, {}).get("spec", {})
        check(policies.get(name, {}).get("apiVersion") == "admissionregistration.k8s.io/v1", f"{name}: GA API (>= 1.30)")
        check(spec.get("failurePolicy") == "Fail", f"{name}: failurePolicy Fail")
        rules = spec.get("matchConstraints", {}).get("resourceRules", [])
        matched = sorted(r for rule in rules if rule.get("apiGroups") == ["msgbench.dev"] for r in rule.get("resources", []))
        ops = {o for rule in rules for o in rule.get("operations", [])}
        check(matched == resources and {"CREATE", "UPDATE"} <= ops, f"{name}: matches {resources} on CREATE and UPDATE, got {rules}")
        validations = spec.get("validations", [])
        check(len(validations) == 1 and reads in validations[0].get("expression", ""), f"{name}: one validation reading {reads}")
        msg = (validations or [{}])[0].get("message", "")
        check(label in msg and msg.startswith(field + ":"), f"{name}: message names {field} and the label {label}: {msg!r}")
        bound = [b for b in bindings if b.get("spec", {}).get("policyName") == name]
        check(len(bound) == 1, f"{name}: bound once")
        bspec = (bound or [{}])[0].get("spec", {})
        check(bspec.get("validationActions") == ["Deny"], f"{name}: binding denies ({bspec.get('validationActions')})")
        selector = bspec.get("matchResources", {}).get("namespaceSelector")
        check(selector == {"matchExpressions": [{"key": key, "operator": "NotIn", "values": [value]}]},
              f"{name}: applies in namespaces without {label}, got {selector}")
    # The CEL reads these fields: they must be what the CRDs call them.
    for plural in ("jetstreamclusters", "mqttbrokers"):
        fi = crd_spec_fields(repo, plural).get("faultInjection", {})
        check(fi.get("properties", {}).get("enabled", {}).get("type") == "boolean", f"{plural}: spec.faultInjection.enabled")
    check(crd_spec_fields(repo, "benchmarkruns").get("faults", {}).get("type") == "array", "benchmarkruns: spec.faults list")
    check("faultInjection" not in crd_spec_fields(repo, "pubsubservers"),
          "PubSubServer has no spec.faultInjection (else the policy must match pubsubservers too)")


OPERAND_IMAGES = ("benchRunner", "pubsubServer", "sockudo", "nats", "mosquitto", "rumqttd")
# The default values with charts/tests/release-values.yaml's digests (a release's chart).
DEFAULT_OPERAND_IMAGES = {
    "benchRunner": "ghcr.io/msgbench/bench-runner:0.1.0@sha256:" + "2" * 64,
    "pubsubServer": "ghcr.io/msgbench/pubsub-server:0.1.0@sha256:" + "3" * 64,
    "sockudo": "ghcr.io/msgbench/sockudo:5.2.0@sha256:" + "7" * 64,
    "nats": "ghcr.io/msgbench/nats-server:2.15.2@sha256:" + "4" * 64,
    "mosquitto": "ghcr.io/msgbench/mosquitto:2.0.11-1.2_deb12u2@sha256:" + "5" * 64,
    "rumqttd": "ghcr.io/msgbench/rumqttd:0.19.0@sha256:" + "6" * 64,
}


def check_operands(docs, dep, container, env):
    """The operator reads its operand defaults from the chart's ConfigMap; returns its content."""
    name = dep["metadata"]["name"] + "-operands"
    cms = [d for d in by_kind(docs, "ConfigMap") if d["metadata"]["name"] == name]
    check(len(cms) == 1, f"ConfigMap {name} with operands.yaml")
    operands = yaml.load(Loader=_LOADER, stream=cms[0]["data"]["operands.yaml"]) if cms else {}
    check(sorted(operands.get("images", {})) == sorted(OPERAND_IMAGES), f"operands.yaml names every operand image: {operands}")
    check(env.get("OPERANDS_CONFIG") == "/etc/msgbench/operands.yaml", "OPERANDS_CONFIG points at the mounted file")
    pod = dep["spec"]["template"]["spec"]
    vol = next((v for v in pod.get("volumes", []) if v.get("configMap", {}).get("name") == name), None)
    check(vol is not None, f"the operator pod mounts ConfigMap {name}")
    mounts = {m["name"]: m["mountPath"] for m in container.get("volumeMounts", [])}
    check(vol is not None and mounts.get(vol["name"]) == "/etc/msgbench", "operands mounted at /etc/msgbench")
    annotations = dep["spec"]["template"]["metadata"].get("annotations", {})
    check(len(annotations.get("checksum/operands", "")) == 64, "a changed operands.yaml rolls the operator (checksum annotation)")
    return operands


def crd_files(chart):
    d = os.path.join(chart, "templates", "crds")
    return sorted(f for f in os.listdir(d) if f.endswith(".yaml")) if os.path.isdir(d) else []


def main():
    case, path, chart = sys.argv[1], sys.argv[2], sys.argv[3]
    with open(path) as f:
        docs = [d for d in yaml.load_all(Loader=_LOADER, stream=f) if d]
    for d in docs:
        check(d.get("metadata", {}).get("labels", {}).get("app.kubernetes.io/part-of") == "msgbench"
              or d.get("kind") == "CustomResourceDefinition",
              f"{d.get('kind')} {d.get('metadata', {}).get('name')}: label app.kubernetes.io/part-of=msgbench")
    dep = one(docs, "Deployment")
    check_security(dep)
    repo = os.path.dirname(os.path.dirname(os.path.abspath(chart)))
    faults = case in ("faults", "faults-network", "faults-power-loss")
    network_faults = case == "faults-network"
    power_loss_faults = case == "faults-power-loss"
    pod_logs = case == "pod-logs"
    retention = case != "no-retention"
    check_rbac(docs, repo, faults, pod_logs, retention)
    sa = one(docs, "ServiceAccount")
    check(sa.get("automountServiceAccountToken") is False, "ServiceAccount must not automount tokens by default")
    check(dep.get("spec", {}).get("template", {}).get("spec", {}).get("serviceAccountName")
          == sa.get("metadata", {}).get("name"), "Deployment uses the chart's ServiceAccount")
    svc = one(docs, "Service")
    check(svc.get("spec", {}).get("ports", [{}])[0].get("targetPort") == "http-metrics", "metrics Service targets http-metrics")
    container = dep.get("spec", {}).get("template", {}).get("spec", {}).get("containers", [{}])[0]
    crds = by_kind(docs, "CustomResourceDefinition")

    env = {e["name"]: e.get("value") for e in container.get("env", [])}
    env_from = {e["name"]: e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") for e in container.get("env", [])}
    check(env_from.get("POD_NAME") == "metadata.name", "POD_NAME from the downward API (Lease identity)")
    check(env_from.get("OPERATOR_NAMESPACE") == "metadata.namespace", "OPERATOR_NAMESPACE from the downward API (Lease namespace)")
    resource_from = {e["name"]: e.get("valueFrom", {}).get("resourceFieldRef", {}).get("resource") for e in container.get("env", [])}
    check(resource_from.get("MEMORY_LIMIT_BYTES") == "limits.memory", "MEMORY_LIMIT_BYTES from the downward API (results memory budget)")
    leader_election = case != "no-leader-election"
    replicas = dep.get("spec", {}).get("replicas")
    strategy = dep.get("spec", {}).get("strategy", {})
    pdbs = by_kind(docs, "PodDisruptionBudget")
    if leader_election:
        check(env.get("LEADER_ELECTION") == "true", "leader election on: LEADER_ELECTION=true")
        check(env.get("LEADER_ELECTION_LEASE") == dep["metadata"]["name"], "the Lease is named after the operator Deployment")
        check(strategy.get("type") == "RollingUpdate", "leader election: RollingUpdate (the new pod starts as a standby)")
        check(str(strategy.get("rollingUpdate", {}).get("maxUnavailable")) == "0",
              "RollingUpdate never drops below replicaCount (maxUnavailable 0)")
    else:
        check("LEADER_ELECTION" not in env, "leader election off: no LEADER_ELECTION")
        check(replicas == 1, "without leader election exactly one operator replica")
        check(strategy.get("type") == "Recreate", "without leader election Recreate: two operators never overlap")
    check_lease_rbac(docs, repo, dep, env, leader_election)
    check_control_key_rbac(docs, repo, dep, env)
    check((env.get("RESULTS_FROM_POD_LOGS") == "true") == pod_logs,
          f"RESULTS_FROM_POD_LOGS exactly when results.fromPodLogs ({pod_logs})")
    check((len(pdbs) == 1) == (isinstance(replicas, int) and replicas > 1), f"a PodDisruptionBudget exactly when replicas > 1 ({replicas})")
    for pdb in pdbs:
        check(pdb.get("spec", {}).get("minAvailable") == 1, "PDB keeps one operator")
        check(pdb.get("spec", {}).get("selector", {}).get("matchLabels")
              == dep.get("spec", {}).get("selector", {}).get("matchLabels"), "PDB selects the operator pods")
    check(env.get("METRICS_ADDR") == "0.0.0.0:8080", "operator serves metrics/health on :8080")
    check((env.get("ALLOW_FAULTS") == "true") == faults, f"ALLOW_FAULTS exactly when faults.enabled ({faults})")
    limits = {k: env.get(k) for k in ("SUCCEEDED_RUNS_HISTORY_LIMIT", "FAILED_RUNS_HISTORY_LIMIT", "DELETE_RUNS_AFTER_SECONDS")}
    if case == "no-retention":
        check(limits == dict.fromkeys(limits), f"retention all null: no retention settings passed, got {limits}")
    elif case != "nondefault":
        check(limits == {"SUCCEEDED_RUNS_HISTORY_LIMIT": "10", "FAILED_RUNS_HISTORY_LIMIT": "10",
                         "DELETE_RUNS_AFTER_SECONDS": None}, f"default retention: 10 and 10 per benchmark, got {limits}")
    check((env.get("ALLOW_NETWORK_FAULTS") == "true") == network_faults,
          f"ALLOW_NETWORK_FAULTS exactly when faults.network ({network_faults})")
    check((env.get("ALLOW_POWER_LOSS_FAULTS") == "true") == power_loss_faults,
          f"ALLOW_POWER_LOSS_FAULTS exactly when faults.powerLoss ({power_loss_faults})")
    if case == "admission-policy":
        check_fault_admission(docs, repo, "msgbench.dev/faults", "enabled")
    elif case == "nondefault":
        check_fault_admission(docs, repo, "example.com/chaos", "allowed")
    else:
        check(not by_kind(docs, "ValidatingAdmissionPolicy") and not by_kind(docs, "ValidatingAdmissionPolicyBinding"),
              "no ValidatingAdmissionPolicy without faults.admissionPolicy.enabled")
    # Runner NetworkPolicies admit pods with these labels: they must be the operator pod's own.
    peer = dict(kv.split("=", 1) for kv in (env.get("OPERATOR_POD_LABELS") or "").split(",") if "=" in kv)
    pod_labels = dep.get("spec", {}).get("template", {}).get("metadata", {}).get("labels", {})
    check(bool(peer) and all(pod_labels.get(k) == v for k, v in peer.items()),
          f"OPERATOR_POD_LABELS {peer} must select the operator pod ({pod_labels})")

    operands = check_operands(docs, dep, container, env)
    if case == "pod-monitor":
        check_pod_monitor(docs, repo, {"any": True})
    else:
        check(case == "nondefault" or not by_kind(docs, "PodMonitor"), "runner PodMonitor off by default")
    if case in ("default", "no-leader-election", "dashboard", "faults", "faults-network", "faults-power-loss", "pod-logs", "pod-monitor",
                "admission-policy", "no-retention"):
        check(operands.get("images") == DEFAULT_OPERAND_IMAGES, f"default operand images, got {operands.get('images')}")
        check(operands.get("imagePullPolicy") == "IfNotPresent", "default operand pull policy")
        check(operands.get("runnerPods") == {"imagePullSecrets": [], "labels": {}, "annotations": {}},
              f"no runner pod additions by default: {operands.get('runnerPods')}")
        check(operands.get("serverNetworkPolicy") == {"clientsFrom": [], "monitoringFrom": []},
              f"servers fenced with no extra sources by default: {operands.get('serverNetworkPolicy')}")
        check("networkPolicy" not in operands.get("serverPods", {}), "the fence is not a pod addition")
        check(replicas == 1, "default: one operator replica")
        check(container.get("image") == "ghcr.io/msgbench/operator:0.1.0@sha256:" + "1" * 64, f"default image, got {container.get('image')}")
        check(container.get("imagePullPolicy") == "IfNotPresent", "default pullPolicy IfNotPresent")
        check(dep["metadata"].get("namespace") == "msgbench-system", "rendered into msgbench-system")
        check(len(by_kind(docs, "ClusterRole")) == 1 and len(by_kind(docs, "ClusterRoleBinding")) == 1,
              "watching all namespaces needs a ClusterRole and its binding")
        check("WATCH_NAMESPACE" not in env and "NO_VARZ" not in env, "defaults: all namespaces, varz on")
        # The CRD templates are generated by crdgen; until they exist the chart renders none.
        expected = crd_files(chart)
        check(len(crds) == len(expected), f"crds.install=true renders {len(expected)} CRDs, got {len(crds)}")
        for c in crds:
            check(c["metadata"].get("annotations", {}).get("helm.sh/resource-policy") == "keep",
                  f"CRD {c['metadata']['name']}: helm.sh/resource-policy keep")
            check(c.get("spec", {}).get("group") == "msgbench.dev", f"CRD {c['metadata']['name']}: group msgbench.dev")
        check(not by_kind(docs, "ServiceMonitor"), "ServiceMonitor off by default")
        if case == "dashboard":
            check_dashboard(docs, repo, "msgbench-system")
        else:
            check(not dashboards(docs), "Grafana dashboard ConfigMap off by default")
        check(not by_kind(docs, "NetworkPolicy"), "NetworkPolicy off by default")
    elif case == "nondefault":
        reg = "registry.example.com:5000/team/"
        check(container.get("image") == reg + "msgbench/operator:0.1.0-dev", f"images.registry and tag: {container.get('image')}")
        check(container.get("imagePullPolicy") == "Always", "custom pullPolicy")
        images = operands.get("images", {})
        check(all(v.startswith(reg) for v in images.values()), f"every operand image under images.registry: {images}")
        check(images.get("benchRunner", "").endswith("/msgbench/bench-runner:0.1.0@sha256:" + "0123456789abcdef" * 4),
              f"a digest pins the image: {images.get('benchRunner')}")
        check(operands.get("imagePullPolicy") == "Always", "operand pull policy follows images.pullPolicy")
        pulls = [{"name": "regcred"}]
        check(dep["spec"]["template"]["spec"].get("imagePullSecrets") == pulls, "operator pod uses images.pullSecrets")
        check(operands.get("runnerPods") == {"imagePullSecrets": pulls, "labels": {"team": "platform"},
                                             "annotations": {"example.com/cost-center": "42"},
                                             "serviceAccountName": "bench-runners", "priorityClassName": "benchmarks"},
              f"runnerPods honoured: {operands.get('runnerPods')}")
        check(operands.get("serverNetworkPolicy") == {
                  "clientsFrom": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "apps"}}}],
                  "monitoringFrom": [{"ipBlock": {"cidr": "10.96.0.0/12"}}]},
              f"serverPods.networkPolicy honoured: {operands.get('serverNetworkPolicy')}")
        check(operands.get("serverPods", {}).get("imagePullSecrets") == pulls
              and operands.get("serverPods", {}).get("priorityClassName") == "messaging",
              f"serverPods honoured: {operands.get('serverPods')}")
        check(not crds, f"crds.install=false must render no CRDs, got {len(crds)}")
        check(not by_kind(docs, "ClusterRole") and not by_kind(docs, "ClusterRoleBinding"),
              "watchNamespace: no cluster-wide RBAC")
        watch_docs = [d for d in docs if not is_own_namespace_role(d)]
        role = one(watch_docs, "Role")
        check(role.get("metadata", {}).get("namespace") == "bench", "watchNamespace: Role in the watched namespace")
        check(one(watch_docs, "RoleBinding").get("metadata", {}).get("namespace") == "bench", "RoleBinding in bench")
        check(env.get("WATCH_NAMESPACE") == "bench", "watchNamespace passed as WATCH_NAMESPACE")
        check(env.get("NO_VARZ") == "true", "observeVarz=false passed as NO_VARZ")
        check(env.get("RUST_LOG") == "msgbench_operator=debug,kube=info", "logLevel passed as RUST_LOG")
        check(env.get("LOG_FORMAT") == "text", "logFormat passed as LOG_FORMAT")
        check(sa["metadata"]["name"] == "msgbench-custom", "custom ServiceAccount name")
        sm = one(docs, "ServiceMonitor")
        check(sm.get("spec", {}).get("endpoints", [{}])[0].get("port") == "http-metrics", "ServiceMonitor scrapes http-metrics")
        check(sm.get("metadata", {}).get("labels", {}).get("release") == "prometheus", "ServiceMonitor labels")
        check(sm.get("spec", {}).get("endpoints", [{}])[0].get("honorLabels") is True,
              "ServiceMonitor honorLabels: the run gauges' own namespace label must survive the scrape")
        check_dashboard(docs, repo, "monitoring")
        check_pod_monitor(docs, repo, {"matchNames": ["bench"]}, {"release": "prometheus"})
        dash = (dashboards(docs) or [{}])[0].get("metadata", {})
        check(dash.get("labels", {}).get("release") == "prometheus", "grafana.dashboard.labels honoured")
        check(dash.get("annotations", {}).get("grafana_folder") == "msgbench", "grafana.dashboard.annotations honoured")
        np = one(docs, "NetworkPolicy")
        ingress = np.get("spec", {}).get("ingress", [{}])
        check(len(ingress) == 1 and ingress[0].get("ports", [{}])[0].get("port") == "http-metrics",
              "NetworkPolicy admits only the metrics port")
        check(ingress[0].get("from", [{}])[0].get("namespaceSelector", {}).get("matchLabels")
              == {"kubernetes.io/metadata.name": "monitoring"}, "NetworkPolicy metricsFrom honoured")
        check(svc["spec"]["ports"][0].get("port") == 9090, "metrics Service port honoured")
        check(replicas == 3, "replicaCount honoured")
    else:
        FAILURES.append(f"unknown case {case}")

    for f in FAILURES:
        print(f"FAIL [{case}]: {f}", file=sys.stderr)
    print(f"{case}: {len(docs)} objects, {len(FAILURES)} failed assertions", file=sys.stderr)
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
