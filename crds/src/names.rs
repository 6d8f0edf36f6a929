//! Name lengths admission enforces: every child and label derived from a name must fit
//! Kubernetes' own limits, so a long name is refused naming the rule instead of failing later
//! where nothing reaches status.
use kube::core::{Message, Rule};

/// Longest name of a server kind (JetStreamCluster, MqttBroker, PubSubServer): its StatefulSet
/// pods carry `controller-revision-hash: <name>-<10-character hash>`, a 63-character label
/// value (the instance label and the Service names fit too).
pub const MAX_SERVER_NAME: usize = 52;

/// A DNS subdomain (RFC 1123), the form of a Secret's or a BenchmarkRun's name: the schema
/// pattern of every field that names one.
pub const DNS_SUBDOMAIN_PATTERN: &str = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$";

/// CEL on the object root: `metadata.name` at most `max` characters.
pub fn name_rule(max: usize) -> Rule {
    Rule::new(format!("size(self.metadata.name) <= {max}")).message(Message::Message(format!(
        "metadata.name: must be at most {max} characters (names of its children and labels \
             derive from it and have Kubernetes' 63-character limits)"
    )))
    // No fieldPath: the API server allows none outside the schema's own fields (metadata is
    // not one); the message names the field.
}

/// The same rule, for objects stored before it existed: what is wrong with `metadata.name`.
pub fn name_violation(name: &str, max: usize) -> Option<String> {
    (name.chars().count() > max).then(|| {
        format!(
            "{} characters, must be at most {max} (names of its children and labels derive \
             from it and have Kubernetes' 63-character limits)",
            name.chars().count()
        )
    })
}
