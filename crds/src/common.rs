//! Shared API pieces: tuning, placement, resources and the server status every server kind reports.
use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::core::Rule;
use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// Sysctls the kubelet allows without `--allowed-unsafe-sysctls` (Kubernetes 1.32+). Anything
/// else makes the pod fail with SysctlForbidden unless the node's kubelet allow-lists it.
pub const SAFE_SYSCTLS: &[&str] = &[
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_wmem",
];

/// True when the kubelet accepts `name` without an allow-list. Sysctl names may use `/` or `.`
/// as separator (the kubelet normalises `/` to `.`).
pub fn is_safe_sysctl(name: &str) -> bool {
    let normalised = name.replace('/', ".");
    SAFE_SYSCTLS.contains(&normalised.as_str())
}

/// CEL list literal of [`SAFE_SYSCTLS`], so the admission rule and the Rust helper share one list.
pub fn safe_sysctls_cel_list() -> String {
    let quoted: Vec<String> = SAFE_SYSCTLS.iter().map(|s| format!("'{s}'")).collect();
    format!("[{}]", quoted.join(", "))
}

fn sysctls_rule() -> Rule {
    Rule::new(format!(
        "self.allowUnsafeSysctls || self.sysctls.all(s, s.name.replace('/', '.') in {})",
        safe_sysctls_cel_list()
    ))
    .message(
        "tuning.sysctls: a sysctl outside the kubelet safe set (e.g. net.core.somaxconn) needs \
         tuning.allowUnsafeSysctls: true and a kubelet --allowed-unsafe-sysctls entry",
    )
    .field_path(".sysctls")
}

/// Performance tuning of the server pods. The operator records what actually took effect in
/// `status.observedTuning`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, KubeSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = sysctls_rule())]
pub struct Tuning {
    /// Pin the server to whole CPUs: the pod gets Guaranteed QoS (requests == limits for CPU and
    /// memory), which the kubelet's static CPU manager turns into an exclusive cpuset. Needs an
    /// integer `resources.limits.cpu` and a `resources.limits.memory`.
    #[serde(default)]
    pub cpu_pinning: bool,
    /// Namespaced sysctls set on the server pods. Names in the kubelet safe set are always
    /// allowed; anything else needs `allowUnsafeSysctls: true`.
    #[serde(default)]
    #[schemars(length(max = 16))]
    #[x_kube(merge_strategy = kube::core::ListMerge::Map(vec!["name".into()]))]
    pub sysctls: Vec<Sysctl>,
    /// Allow sysctls outside the kubelet safe set. The node's kubelet must list them in
    /// `--allowed-unsafe-sysctls`, otherwise the pod fails with SysctlForbidden and the server
    /// reports Degraded.
    #[serde(default)]
    pub allow_unsafe_sysctls: bool,
    /// Server thread count (GOMAXPROCS for nats-server, worker threads for Rust servers).
    /// Unset: derived from the CPU limit, rounded up, at least 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 256))]
    pub threads: Option<u16>,
}

/// Sysctl name grammar, as the API server validates pod sysctls: segments of `a-z0-9-_` that
/// start and end alphanumeric, separated by `.` or `/`. RE2 syntax (CEL `matches`).
pub const SYSCTL_NAME_PATTERN: &str =
    "^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?$";
const SYSCTL_NAME_RULE: &str = "must be a sysctl name: segments of a-z, 0-9, '-' and '_', each \
     starting and ending with a letter or digit, separated by '.' or '/' (e.g. net.ipv4.tcp_fin_timeout)";
/// Sysctl values are printable ASCII: a newline would let one value smuggle in a second setting.
pub const SYSCTL_VALUE_PATTERN: &str = "^[ -~]*$";
const SYSCTL_VALUE_RULE: &str =
    "must be printable ASCII (space to '~'): no newlines, tabs or other control characters";

fn sysctl_name_rule() -> Rule {
    Rule::new(format!("self.matches('{SYSCTL_NAME_PATTERN}')")).message(SYSCTL_NAME_RULE)
}

fn sysctl_value_rule() -> Rule {
    Rule::new(format!("self.matches('{SYSCTL_VALUE_PATTERN}')")).message(SYSCTL_VALUE_RULE)
}

/// One namespaced sysctl.
#[derive(Clone, Debug, Deserialize, Serialize, KubeSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Sysctl {
    /// Sysctl name, e.g. `net.ipv4.tcp_fin_timeout`: segments of `a-z0-9-_` (starting and
    /// ending alphanumeric) separated by `.` or `/`.
    #[schemars(length(min = 1, max = 128))]
    #[x_kube(validation = sysctl_name_rule())]
    pub name: String,
    /// Value as the kernel expects it, e.g. `"30"` or `"4096 87380 6291456"`: printable ASCII,
    /// 1-256 characters.
    #[schemars(length(min = 1, max = 256))]
    #[x_kube(validation = sysctl_value_rule())]
    pub value: String,
}

/// `(field, rule)` when `s` breaks a rule admission enforces. The operator repeats the check for
/// objects stored before the rules existed (the API server lets unchanged fields stay).
pub fn sysctl_problem(s: &Sysctl) -> Option<(&'static str, &'static str)> {
    let edge = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    let segment_ok = |seg: &str| {
        let b = seg.as_bytes();
        b.first().is_some_and(edge)
            && b.last().is_some_and(edge)
            && b.iter().all(|c| edge(c) || *c == b'-' || *c == b'_')
    };
    if s.name.len() > 128 || !s.name.split(['.', '/']).all(segment_ok) {
        return Some(("name", SYSCTL_NAME_RULE));
    }
    let printable = s.value.bytes().all(|c| (b' '..=b'~').contains(&c));
    if s.value.is_empty() || s.value.len() > 256 || !printable {
        return Some(("value", SYSCTL_VALUE_RULE));
    }
    None
}

/// Where the server pods run.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Placement {
    /// Node labels the pods must match.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(schema_with = "node_selector_schema")]
    pub node_selector: BTreeMap<String, String>,
    /// Taints the pods tolerate.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    pub tolerations: Vec<Toleration>,
    /// Spread replicas over nodes: `required` (unschedulable replicas wait for a node),
    /// `preferred` (spread when possible, the default) or `none`.
    #[serde(default)]
    pub pod_anti_affinity: AntiAffinity,
}

/// Label map with bounded keys and values (label values are at most 63 characters).
fn node_selector_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "maxProperties": 16,
        "additionalProperties": {"type": "string", "maxLength": 63}
    })
}

/// Pod anti-affinity between replicas of one server.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub enum AntiAffinity {
    /// One replica per node, enforced by the scheduler.
    Required,
    /// One replica per node when the scheduler can; co-location otherwise.
    #[default]
    Preferred,
    /// No spreading constraint.
    None,
}

/// A toleration, as in a pod spec (bounded subset). A key is required: a key-less `Exists`
/// tolerates every taint, control-plane and NoExecute ones included, which a user who may
/// create benchmarks should not be able to give pods (see operator/RBAC.md, trust model).
#[derive(Clone, Debug, Default, Deserialize, Serialize, KubeSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("has(self.key) && self.key != ''").message("placement.tolerations[].key: required (a toleration without a key tolerates every taint)").field_path(".key"))]
pub struct Toleration {
    /// Taint key (required).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    pub key: Option<String>,
    /// `Exists` or `Equal` (default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator: Option<TolerationOperator>,
    /// Taint value matched with operator Equal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 63))]
    pub value: Option<String>,
    /// Taint effect to tolerate; empty means all effects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effect: Option<TaintEffect>,
    /// For NoExecute: how long the pod stays bound after the taint appears.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 86400))]
    pub toleration_seconds: Option<i64>,
}

/// Toleration operator.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
pub enum TolerationOperator {
    /// Matches any value of the key.
    Exists,
    /// Matches key and value.
    Equal,
}

/// Taint effect.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
pub enum TaintEffect {
    /// New pods are not scheduled.
    NoSchedule,
    /// The scheduler avoids the node.
    PreferNoSchedule,
    /// Running pods are evicted.
    NoExecute,
}

/// CPU and memory of one container. Pinning needs integer CPUs and requests == limits.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Resources {
    /// Guaranteed minimum; defaults to the limits when only limits are given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<ResourceAmounts>,
    /// Hard ceiling. The CPU limit also sets the server's default thread count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<ResourceAmounts>,
}

/// CPU and memory amounts.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ResourceAmounts {
    /// CPU, e.g. `2` or `500m`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "quantity_schema")]
    pub cpu: Option<Quantity>,
    /// Memory, e.g. `512Mi`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "quantity_schema")]
    pub memory: Option<Quantity>,
}

/// A Kubernetes quantity (`2`, `500m`, `1Gi`) as int-or-string, bounded so CEL rules stay cheap.
pub fn quantity_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "x-kubernetes-int-or-string": true,
        // allOf, not anyOf: each keyword applies only to its own JSON type, so an int meets
        // the bound and a string the length and pattern.
        "allOf": [
            {"minimum": 0},
            {"maxLength": 32,
             "pattern": "^(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))))?$"}
        ]
    })
}

/// Cross-field rules for a server spec holding `tuning` and `resources` (applied on each server
/// kind's spec, since CEL sees only the subtree it is attached to).
pub fn pinning_rules() -> Vec<Rule> {
    let pinned = "has(self.tuning) && self.tuning.cpuPinning";
    let lim = "has(self.resources) && has(self.resources.limits)";
    vec![
        Rule::new(format!(
            "!({pinned}) || ({lim} && has(self.resources.limits.cpu) && \
             quantity(string(self.resources.limits.cpu)).isInteger())"
        ))
        .message(
            "resources.limits.cpu: tuning.cpuPinning needs an integer CPU limit (e.g. 1 or 2, \
             not 500m or 1.5)",
        )
        .field_path(".resources"),
        Rule::new(format!(
            "!({pinned}) || ({lim} && has(self.resources.limits.memory))"
        ))
        .message(
            "resources.limits.memory: tuning.cpuPinning needs a memory limit (Guaranteed QoS \
             requires requests == limits for CPU and memory)",
        )
        .field_path(".resources"),
        Rule::new(format!(
            "!({pinned}) || !has(self.resources.requests) || \
             ((!has(self.resources.requests.cpu) || !has(self.resources.limits.cpu) || \
               quantity(string(self.resources.requests.cpu)).compareTo(quantity(string(self.resources.limits.cpu))) == 0) && \
              (!has(self.resources.requests.memory) || !has(self.resources.limits.memory) || \
               quantity(string(self.resources.requests.memory)).compareTo(quantity(string(self.resources.limits.memory))) == 0))"
        ))
        .message(
            "resources.requests: with tuning.cpuPinning, requests must equal limits for CPU and \
             memory (Guaranteed QoS)",
        )
        .field_path(".resources"),
    ]
}

/// Status common to every server kind.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ServerStatus {
    /// Ready, Progressing and Degraded, each with reason, message and observedGeneration.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The spec generation the operator last reconciled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Server pods that exist.
    #[serde(default)]
    pub replicas: i32,
    /// Server pods that pass their readiness probe.
    #[serde(default)]
    pub ready_replicas: i32,
    /// Client URL inside the cluster, e.g. `nats://demo.bench.svc:4222`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The tuning actually in effect on the server pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_tuning: Option<ObservedTuning>,
    /// The image each server pod runs, with its digest once the kubelet has pulled it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 8))]
    pub images: Vec<RunningImage>,
}

/// The image one pod's server container runs.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RunningImage {
    /// Pod name.
    pub pod: String,
    /// The image reference in the pod spec.
    pub image: String,
    /// What the kubelet pulled, by digest (`repo@sha256:…`); unset until it has.
    #[serde(default, rename = "imageID", skip_serializing_if = "Option::is_none")]
    pub image_id: Option<String>,
}

/// Tuning observed on the running server pods, not just requested.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ObservedTuning {
    /// The pods' QoS class (Guaranteed, Burstable, BestEffort).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qos_class: Option<String>,
    /// Whether exclusive CPUs can take effect: Guaranteed QoS with integer CPUs. Whether the node
    /// runs the static CPU manager shows in `cpus`.
    #[serde(default)]
    pub pinning_effective: bool,
    /// Why pinning is not effective, when it was requested.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pinning_reason: Option<String>,
    /// The cpuset the server saw, e.g. `1-2`, when it reports one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<String>,
    /// Sysctls set on the pods.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    pub sysctls_applied: Vec<Sysctl>,
    /// Thread count the server was started with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<u16>,
}

/// The server kinds' condition types, kept at this path for existing users; the vocabulary
/// (every kind's types, statuses and the setter) is [`crate::conditions`].
pub mod condition {
    pub use crate::conditions::{DEGRADED, PROGRESSING, READY};
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn safe_set_matches_the_kubelet_and_excludes_somaxconn() {
        assert!(is_safe_sysctl("net.ipv4.tcp_fin_timeout"));
        assert!(is_safe_sysctl("net/ipv4/ip_local_port_range"));
        assert!(!is_safe_sysctl("net.core.somaxconn"));
        assert!(!is_safe_sysctl("net.ipv4.tcp_max_syn_backlog"));
        assert!(!is_safe_sysctl("net.ipv4.tcp_fin_timeout.x"));
    }

    #[test]
    fn cel_list_and_rust_helper_share_one_set() {
        let list = safe_sysctls_cel_list();
        for name in SAFE_SYSCTLS {
            assert!(
                list.contains(&format!("'{name}'")),
                "{name} missing from CEL list"
            );
        }
        assert_eq!(list.matches('\'').count(), SAFE_SYSCTLS.len() * 2);
        assert!(sysctls_rule().rule.contains(&list));
    }

    fn sysctl(name: &str, value: &str) -> Sysctl {
        Sysctl {
            name: name.into(),
            value: value.into(),
        }
    }

    /// (name, value, which field is wrong)
    const SYSCTL_CASES: &[(&str, &str, Option<&str>)] = &[
        ("net.ipv4.tcp_fin_timeout", "15", None),
        ("net/ipv4/ip_local_port_range", "1024 65000", None),
        ("net.ipv4.conf.eth-0.rp_filter", "1", None),
        ("kernel.shm_rmid_forced", "1", None),
        ("net.ipv4.tcp_rmem", "4096 87380 6291456", None),
        ("x", "~!@#$%^&*()_+`-={}[]|:;'<>?,./ \"", None),
        ("net.core.somaxconn; reboot", "1", Some("name")),
        ("Net.core.somaxconn", "1", Some("name")),
        ("net..core", "1", Some("name")),
        (".net.core", "1", Some("name")),
        ("net.core.", "1", Some("name")),
        ("net._core", "1", Some("name")),
        ("net.core-", "1", Some("name")),
        ("", "1", Some("name")),
        (
            "net.ipv4.tcp_fin_timeout",
            "15\nkernel.panic=1",
            Some("value"),
        ),
        ("net.ipv4.tcp_fin_timeout", "15\r", Some("value")),
        ("net.ipv4.tcp_fin_timeout", "4096\t87380", Some("value")),
        ("net.ipv4.tcp_fin_timeout", "15\u{7f}", Some("value")),
        ("net.ipv4.tcp_fin_timeout", "\u{1b}[1m15", Some("value")),
        ("net.ipv4.tcp_fin_timeout", "fünfzehn", Some("value")),
        ("net.ipv4.tcp_fin_timeout", "", Some("value")),
    ];

    #[test]
    fn sysctl_check_names_the_broken_field() {
        for (name, value, want) in SYSCTL_CASES {
            let got = sysctl_problem(&sysctl(name, value)).map(|(field, _)| field);
            assert_eq!(got, *want, "{name:?} = {value:?}");
        }
        let long = sysctl(&"a".repeat(129), "1");
        assert_eq!(sysctl_problem(&long).map(|p| p.0), Some("name"));
        let long = sysctl("a", &"1".repeat(257));
        assert_eq!(sysctl_problem(&long).map(|p| p.0), Some("value"));
    }

    /// The CEL patterns (RE2, as the API server runs them) agree with the Rust check.
    #[test]
    fn sysctl_patterns_agree_with_the_rust_check() {
        let name = regex::Regex::new(SYSCTL_NAME_PATTERN).unwrap();
        let value = regex::Regex::new(SYSCTL_VALUE_PATTERN).unwrap();
        for (n, v, want) in SYSCTL_CASES {
            let by_pattern = if !name.is_match(n) {
                Some("name")
            } else if v.is_empty() || !value.is_match(v) {
                Some("value")
            } else {
                None
            };
            assert_eq!(by_pattern, *want, "{n:?} = {v:?}");
        }
        // No backslash or quote: the pattern sits inside a single-quoted CEL string.
        for p in [SYSCTL_NAME_PATTERN, SYSCTL_VALUE_PATTERN] {
            assert!(!p.contains(['\\', '\'', '"']), "{p}");
        }
        assert!(sysctl_value_rule().rule.contains(SYSCTL_VALUE_PATTERN));
        assert!(sysctl_name_rule().rule.contains(SYSCTL_NAME_PATTERN));
    }

    #[test]
    fn tuning_defaults_to_no_pinning_and_safe_sysctls_only() {
        let t: Tuning = serde_json::from_str("{}").expect("empty tuning");
        assert_eq!(t, Tuning::default());
        assert!(!t.cpu_pinning && !t.allow_unsafe_sysctls && t.sysctls.is_empty());
    }
}
