//! The exact API access the operator uses, each verb with what it is for. `operator/RBAC.md` is
//! rendered from these tables (a test keeps them equal); `charts/test.sh` checks the chart's
//! roles against RBAC.md.

/// (API group, resources, verbs, what for). Children are only listed (never fetched one by one),
/// applied (SSA: `patch`, plus `create` for the first apply) and deleted when orphaned. Secrets
/// only created (generated route passwords), never read; pod logs: see [`CONTROL_KEY_RULES`]
/// and [`LOG_RULES`].
pub const RULES: &[(&str, &[&str], &[&str], &str)] = &[
    (
        "msgbench.dev",
        &["jetstreamclusters", "mqttbrokers", "pubsubservers"],
        &["list", "watch"],
        "the server kinds it reconciles",
    ),
    (
        "msgbench.dev",
        &[
            "jetstreamclusters/status",
            "mqttbrokers/status",
            "pubsubservers/status",
        ],
        &["patch"],
        "their status (server-side apply)",
    ),
    (
        "",
        &["configmaps", "services"],
        &["list", "watch", "create", "patch", "delete"],
        "server config and Services, runner agent configs: applied, watched, orphans deleted",
    ),
    (
        "apps",
        &["statefulsets", "deployments"],
        &["list", "watch", "create", "patch", "delete"],
        "the server workloads: applied, watched, orphans deleted",
    ),
    (
        "policy",
        &["poddisruptionbudgets"],
        &["list", "watch", "create", "patch", "delete"],
        "the servers' PodDisruptionBudgets",
    ),
    (
        "",
        &["secrets"],
        &["create"],
        "a JetStreamCluster's route password, generated once (random, owned by the cluster); never read back, updated or deleted (garbage collection removes it)",
    ),
    (
        "",
        &["pods"],
        &["list", "watch"],
        "server and runner pods: readiness, QoS, kubelet refusals (a missing Secret included), IPs",
    ),
    (
        "events.k8s.io",
        &["events"],
        &["create", "patch"],
        "Events on its objects (faults injected, runs finished)",
    ),
    (
        "msgbench.dev",
        &["benchmarkruns"],
        &["get", "list", "watch", "patch"],
        "runs; `get`: a run's baseline run by name; `patch`: only the finalizer `msgbench.dev/streams`, held while a run may have JetStream streams (server-side apply by a field manager of its own)",
    ),
    (
        "msgbench.dev",
        &["benchmarkruns/status"],
        &["patch"],
        "a run's status: phase, results, verdict",
    ),
    (
        "msgbench.dev",
        &["jetstreamclusters", "mqttbrokers", "pubsubservers"],
        &["get"],
        "a run's target server, by name",
    ),
    (
        "batch",
        &["jobs"],
        &["get", "list", "watch", "create", "patch", "delete"],
        "runner Jobs: created, watched, suspended when a run ends, deleted with old generations",
    ),
    (
        "networking.k8s.io",
        &["networkpolicies"],
        &["list", "watch", "create", "patch", "delete"],
        "per-server NetworkPolicy (its fence: applied, watched, orphans deleted) and per-run NetworkPolicy: only the operator reaches the runners' control port (their metrics port stays open to scrapes)",
    ),
    (
        "discovery.k8s.io",
        &["endpointslices"],
        &["list"],
        "a run's target Service must list a ready endpoint before runners start",
    ),
];

/// Reading runner results from pod logs (`--results-from-pod-logs`; chart value
/// `results.fromPodLogs`, off by default): only when a runner exited before the operator read
/// its results from the runner itself (an operator down longer than `resultsHoldSeconds`).
pub const LOG_RULES: &[(&str, &[&str], &[&str], &str)] = &[(
    "",
    &["pods/log"],
    &["get"],
    "results framed in the log of a runner pod that exited holding them",
)];

/// Retention (`--succeeded-runs-history-limit`, `--failed-runs-history-limit`,
/// `--delete-runs-after-seconds`; the chart's `retention.*`, on by default): deleting finished
/// runs the policy no longer keeps. Granted only when one of them is set.
pub const RETENTION_RULES: &[(&str, &[&str], &[&str], &str)] = &[(
    "msgbench.dev",
    &["benchmarkruns"],
    &["delete"],
    "deleting finished runs the retention policy no longer keeps (on the condition of their uid)",
)];

/// (API group, resources, verbs, limited by `resourceNames`, what for).
pub type NamedRule = (
    &'static str,
    &'static [&'static str],
    &'static [&'static str],
    bool,
    &'static str,
);

/// The runner control key (`--control-key-secret`): a Role in the operator's own namespace.
/// (API group, resources, verbs, limited by `resourceNames` to the key Secret, what for).
pub const CONTROL_KEY_RULES: &[NamedRule] = &[
    (
        "",
        &["secrets"],
        &["get"],
        true,
        "reading the key that signs runner control credentials",
    ),
    // `create` carries the name in the request body: RBAC cannot limit it by name.
    (
        "",
        &["secrets"],
        &["create"],
        false,
        "creating that key on first start",
    ),
];

/// Fault injection (`--allow-faults`; chart value `faults.enabled`, off by default): delete (or
/// kill, grace 1 s) one server pod of a run's target, only a pod whose StatefulSet that server
/// owns, and only while the run measures.
/// (API group, resources, verbs, what for).
pub const FAULT_RULES: &[(&str, &[&str], &[&str], &str)] = &[
    (
        "",
        &["pods"],
        &["delete"],
        "deleting one server pod of the run's own target",
    ),
    (
        "apps",
        &["replicasets"],
        &["list"],
        "checking that a Deployment's pod belongs to the target (pod → ReplicaSet → Deployment)",
    ),
];

/// Leader election (`--leader-election`, on in the chart): a Role in the operator's own namespace.
/// (API group, resources, verbs, limited by `resourceNames` to the Lease). kube-lease-manager
/// reads the Lease (`get`), creates it once when missing and changes it only by patches
/// (server-side apply to take it, strategic merge to renew and release it).
pub const LEASE_RULES: &[(&str, &[&str], &[&str], bool)] = &[
    ("coordination.k8s.io", &["leases"], &["get", "patch"], true),
    // `create` carries the name in the request body: RBAC cannot limit it by name.
    ("coordination.k8s.io", &["leases"], &["create"], false),
];

/// `| group | resources | verbs` of one rule (the caller closes the row).
fn row(group: &str, resources: &[&str], verbs: &[&str]) -> String {
    let group = if group.is_empty() {
        "\"\" (core)"
    } else {
        group
    };
    format!(
        "| {group} | {} | {}",
        resources.join(", "),
        verbs.join(", ")
    )
}

/// Markdown tables of [`RULES`], [`CONTROL_KEY_RULES`], [`LEASE_RULES`], [`FAULT_RULES`],
/// [`LOG_RULES`] and [`RETENTION_RULES`] (the content of `operator/RBAC.md`).
pub fn render_markdown() -> String {
    let mut s = String::from(
        "# RBAC used by msgbench-operator\n\n\
         Generated from `operator/src/access/rbac.rs` (`cargo test -p msgbench-operator rbac`\n\
         checks it; `charts/test.sh` checks the chart against it). Runner and server pods get no\n\
         API access at all (no token mounted).\n\n\
         ## Cluster-wide\n\n\
         A ClusterRole, or a Role in that namespace when the operator runs with `--namespace`.\n\
         No Secret is read and no pod log: the operator never reads a Secret a spec names (pods\n\
         take them by reference; a missing one shows as the kubelet's refusal in the pod status),\n\
         and the one kind of Secret it writes (JetStream route passwords) it only creates.\n\n",
    );
    four_column_table(&mut s, RULES);
    control_key_section(&mut s);
    leader_election_section(&mut s);
    s.push_str(
        "\n## Fault injection\n\n\
         Only with `--allow-faults` (chart value `faults.enabled`, off by default), for \
         BenchmarkRun `spec.faults`. Added to the cluster-wide role. The same switch lets \
         server pods carry the fault agent their `spec.faultInjection` asks for, which needs no \
         API access (and `--allow-network-faults`, chart value `faults.network`, one with \
         network faults).\n\n",
    );
    four_column_table(&mut s, FAULT_RULES);
    s.push_str(
        "\n## Results from pod logs\n\n\
         Only with `--results-from-pod-logs` (chart value `results.fromPodLogs`, off by default). \
         Added to the cluster-wide role. Off, a run whose runner exited before the operator read \
         its results ends `ResultsLost`, naming both remedies.\n\n",
    );
    four_column_table(&mut s, LOG_RULES);
    s.push_str(
        "\n## Retention\n\n\
         Only while a retention setting is set (chart values `retention.succeededRunsHistoryLimit`, \
         `retention.failedRunsHistoryLimit`, `retention.deleteAfterSeconds`; the first two are set \
         by default). Added to the cluster-wide role. Without them, finished runs stay until \
         someone deletes them.\n\n",
    );
    four_column_table(&mut s, RETENTION_RULES);
    s.push_str(
        "\nNot needed: `get` on children (the operator lists by label), `update` (server-side \
         apply only),\n`pods/proxy` or `pods/exec` (nats `/varz` and mosquitto `$SYS` are read from the pod \
         IP), \
         `persistentvolumeclaims`\n(created by the StatefulSet controller, deleted with it: \
         whenDeleted=Delete), `benchmarkruns/finalizers` \
         (children go by owner-reference garbage collection; the stream sweep Job has no owner),\n`nodes/proxy` or \
         `metrics.k8s.io` (a run's serverUsage comes from nats `/varz`, pubsub-server \
         `/health` and mosquitto `$SYS` on the pod IPs),\n`list`, `watch`, `update` or `delete` on leases (the \
         operator reads and patches its own Lease by name), \
         `list` or `watch` on events.\n",
    );
    s.push_str(TRUST_MODEL);
    s
}

/// The Role for the runner control key's Secret.
fn control_key_section(s: &mut String) {
    s.push_str(
        "\n## Runner control key\n\n\
         A Role in the operator's own namespace (`--control-key-secret`; the chart always sets \
         it).\n\n\
         | apiGroup | resources | resourceNames | verbs | used for |\n|---|---|---|---|---|\n",
    );
    for (group, resources, verbs, by_name, used_for) in CONTROL_KEY_RULES {
        let names = match by_name {
            true => "the key Secret (chart: `<release>-operator-control-key`)",
            false => "(any: `create` cannot be limited by name)",
        };
        s.push_str(&format!(
            "{} | {used_for} |\n",
            row_with_names(group, resources, names, verbs)
        ));
    }
}

/// The Role for the leader election's Lease.
fn leader_election_section(s: &mut String) {
    s.push_str(
        "\n## Leader election\n\n\
         A Role in the operator's own namespace (only with `--leader-election`, the chart's \
         default).\n\n\
         | apiGroup | resources | resourceNames | verbs |\n|---|---|---|---|\n",
    );
    for (group, resources, verbs, by_name) in LEASE_RULES {
        let names = if *by_name {
            "the Lease (`--leader-election-lease`; chart: `<release>-operator`)"
        } else {
            "(any: `create` cannot be limited by name)"
        };
        s.push_str(&format!(
            "| {group} | {} | {names} | {} |\n",
            resources.join(", "),
            verbs.join(", ")
        ));
    }
    s.push_str(
        "\nA leader that steps down campaigns again in the same process with the same \
         rules (get and patch\nthe Lease; create only if it was deleted meanwhile).\n",
    );
}

fn four_column_table(s: &mut String, rules: &[(&str, &[&str], &[&str], &str)]) {
    s.push_str("| apiGroup | resources | verbs | used for |\n|---|---|---|---|\n");
    for (group, resources, verbs, used_for) in rules {
        s.push_str(&format!(
            "{} | {used_for} |\n",
            row(group, resources, verbs)
        ));
    }
}

/// `| group | resources | names | verbs` (the caller closes the row).
fn row_with_names(group: &str, resources: &[&str], names: &str, verbs: &[&str]) -> String {
    let group = if group.is_empty() {
        "\"\" (core)"
    } else {
        group
    };
    format!(
        "| {group} | {} | {names} | {}",
        resources.join(", "),
        verbs.join(", ")
    )
}

/// Who can make the operator do what: appended to RBAC.md.
const TRUST_MODEL: &str = "
## Trust model

Creating a msgbench object means running pods: whoever may create a `BenchmarkRun` or a server
kind in a namespace can run its image there with the resources, sysctls and placement the spec
allows. So treat `create` on `msgbench.dev` resources like `create` on Deployments and Jobs in
that namespace, and grant it to the same people. What bounds it:

- **Namespace.** Children go only into the object's own namespace. With `watchNamespace`
  (chart value) the operator gets a Role in that one namespace instead of the ClusterRole.
- **Pods.** Every pod is non-root, read-only root filesystem, seccomp RuntimeDefault, all
  capabilities dropped, never privileged. Runner pods get no API token and a NetworkPolicy
  that lets only the operator reach their control port (the read-only metrics port stays open
  to scrapes). Unsafe sysctls need `tuning.allowUnsafeSysctls: true` and the node's kubelet
  allow-list.
- **Network.** Every server object gets a NetworkPolicy (its fence): client ports only from
  pods of its own namespace, the operator and the chart's `serverPods.networkPolicy.clientsFrom`;
  NATS routes only from the server's own pods; monitoring ports (nats 8222, sockudo metrics) and
  the fault agent's port only from the operator (monitoring also from `monitoringFrom`). It
  binds only where the network plugin enforces NetworkPolicy.
- **Placement.** A toleration needs a key (admission): no key-less `Exists` that tolerates
  every taint, control-plane and NoExecute taints included. Node selectors and tolerations
  are capped at 16 entries.
- **Images.** `spec.runners.image` and `spec.image` are the user's choice. To bound them,
  apply `config/policies/allowed-images.yaml`, a ValidatingAdmissionPolicy the API server
  enforces for every client (edit its list of prefixes; `e2e/tests/e2e/image_policy.rs` proves it).
  The images the chart installs (the operator's and its operands' defaults) are pinned by digest
  in the README's install: `make push` writes the values, so every pod asks for the content
  pushed, whatever a tag names later. Their pull Secrets hold a pull credential of their own,
  never the one that pushes (`e2e/tests/e2e/registry_install.rs` checks both).
- **What a runner image can do to the operator.** Nothing beyond its own run: the operator
  reads at most 32 MiB of records per run, checks every histogram header and record shape
  before decoding, and a record it cannot read fails that run as `ResultsLost`.
- **Secrets.** The operator reads one Secret: its own control key, by name, in its own
  namespace. With it the operator signs one credential per control request (see \"Control
  credentials\" below); runner pods hold only the public keys and their run's uid
  (`runner_api::control_auth`). It creates one Secret per
  JetStreamCluster of more than one server (`<name>-routes`, a random route password the
  servers take by reference) and never reads it back; `create` cannot be limited by name, so
  it can create (not read, change or delete) Secrets wherever it watches. The auth and TLS Secrets a
  server spec names go to pods by reference only; the operator learns of a missing one or
  key from the kubelet's refusal in the pod status (reasons `SecretNotFound`,
  `SecretKeyMissing`). Pod logs are read only with `results.fromPodLogs`, and then only of a
  run's own runner pods, as the fallback path for results.
- **Pods deleted.** `delete` on pods is granted only with `faults.enabled`, for
  `BenchmarkRun.spec.faults`; without it a run with faults ends `FaultsNotAllowed`. The operator
  deletes a pod only while that run measures, only a pod whose StatefulSet is controlled by the
  run's target server object (checked by owner uid, then deleted with a uid precondition), and
  records every deletion in the run's status and as an Event. Admission refuses faults on an
  `endpoint` target. RBAC cannot narrow `delete` by label: whoever runs the operator grants it
  for every pod the operator can see.
- **Fault agents.** A server with `spec.faultInjection.enabled` carries a fault agent that can
  SIGKILL or SIGSTOP its server process (`crash`, `pause`). It needs no API access and no
  capability (it runs as the server's user in the pod's shared process namespace), and it obeys
  only credentials the operator signs for that server object's uid with its control key. With
  `spec.faultInjection.network` it can also drop the pod's traffic on the server's ports
  (`partition`, nftables in the pod's own network namespace): then it runs as uid 0 with exactly
  NET_ADMIN and KILL, no privilege escalation, a read-only root — the Pod Security `privileged`
  level, opted into per server object. Servers without it are never touched by anything but pod
  deletion. The install bounds what a spec can ask: without `faults.enabled` no server gets an
  agent, and a network agent also needs `faults.network`; a server asking for more runs without
  one, `Degraded` with reason `FaultInjectionNotAllowed` naming the chart value. Where faults are
  on, `faults.admissionPolicy.enabled` adds a ValidatingAdmissionPolicy that refuses
  `spec.faultInjection` and BenchmarkRun `spec.faults` in every namespace without the label
  `msgbench.dev/faults=enabled` (configurable), so who may label namespaces decides where.

## Control credentials

Runner agents (port 9090) and fault agents (port 9091) speak plain HTTP inside the cluster; what
keeps anyone else from driving them is a credential the operator signs with its Ed25519 key
(`runner_api::control_auth`), sent as `Authorization: Bearer msgbench2.…`:

- **One request.** The signed claim names the scope (the run's uid for its runners, the server
  object's uid for its fault agents), the HTTP method, the path with its query, an expiry 30 s
  after signing and a random 16-byte nonce. The agent refuses (403, with the reason) a
  credential for another scope, another method or path, out of its time (30 s of clock skew
  tolerated either way), or one it has already seen: each nonce is remembered until its
  credential expires, at most 4096 at once, and a full cache refuses (503) rather than grows.
  So a credential read off the wire cannot be replayed, nor used on another endpoint. The
  older `msgbench1.` credentials (a bearer token for any path for five minutes) are refused,
  saying so: runs in flight across an upgrade to this version fail.
- **Fail closed.** An agent without the public keys (`MSGBENCH_CONTROL_PUBLIC_KEY`) or its
  scope (`MSGBENCH_RUN_UID`, `MSGBENCH_SERVER_UID`) does not start: it exits non-zero naming the
  missing variable. There is no unauthenticated mode. `/ready` (the kubelet's probe) is the only
  open path.
- **Key rotation.** The key Secret holds `ed25519.seed` (current) and, after a rotation,
  `ed25519.previous.seed`. The operator signs every credential with each key it holds, and
  agent pods get both public keys (comma-separated, current first): pods made before the
  rotation know only the old key and still accept, pods made after accept either. Rotation is
  by hand; the operator reads the Secret when it starts. Server pods with a fault agent roll
  when the key list changes (it is in their pod template). The next rotation replaces the
  previous key: runner pods older than two rotations then refuse the operator, so rotate no
  more often than the longest run lasts.

```sh
kubectl -n $NS get secret $RELEASE-operator-control-key \\
  -o jsonpath='{.data.ed25519\\.seed}' | base64 -d > previous.seed
head -c 32 /dev/urandom > current.seed
kubectl -n $NS delete secret $RELEASE-operator-control-key
kubectl -n $NS create secret generic $RELEASE-operator-control-key \\
  --from-file=ed25519.seed=current.seed --from-file=ed25519.previous.seed=previous.seed
kubectl -n $NS rollout restart deployment/$RELEASE-operator
shred -u current.seed previous.seed
```
";

#[cfg(test)]
mod tests {
    #[test]
    fn rbac_md_matches_the_rules_table() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/RBAC.md");
        let want = super::render_markdown();
        if std::env::var_os("UPDATE_RBAC").is_some() {
            std::fs::write(path, &want).expect("write RBAC.md");
        }
        let have = std::fs::read_to_string(path).unwrap_or_default();
        assert_eq!(
            have, want,
            "operator/RBAC.md is stale: rerun with UPDATE_RBAC=1"
        );
    }
}
