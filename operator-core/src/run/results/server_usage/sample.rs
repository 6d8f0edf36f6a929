//! One server pod's reading, whichever endpoint it came from.
use msgbench_crds::mqtt_broker::MqttBrokerSpec;

/// One reading of one pod.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    pub cpu: Cpu,
    pub rss_bytes: u64,
    pub connections: Option<u64>,
    /// The server's own report of its version (nats `/varz` `version`).
    pub version: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Cpu {
    /// Cores in use right now (nats computes it over its last second).
    Cores(f64),
    /// Cumulative process CPU seconds; cores come from the difference between samples.
    Seconds(f64),
    /// The server reports no CPU figure: why.
    Unreported(&'static str),
}

/// Why a broker with `spec.auth` has no figures at all: `$SYS` is read over MQTT, the broker
/// refuses anonymous clients, and the operator never reads the Secret that would let it in.
pub const MOSQUITTO_NEEDS_CREDENTIALS: &str =
    "the broker requires credentials the operator does not read (spec.auth)";

/// Why a broker with `spec.tls` (and no `spec.auth`) has no figures: `$SYS` is read over the
/// MQTT port, which then speaks only TLS, and the operator neither reads the Secret with the CA
/// that would verify the broker nor connects unverified. (A plain listener just for `$SYS`
/// would be a way around the TLS the spec asks for, so there is none.)
pub const MOSQUITTO_NEEDS_CA: &str =
    "the broker serves only TLS, with a CA the operator does not read (spec.tls)";

/// Why the operator cannot read a broker's `$SYS` tree, if it cannot: a login comes first
/// (with both, a CA alone would not let it in).
pub fn mosquitto_sys_closed(spec: &MqttBrokerSpec) -> Option<&'static str> {
    if spec.auth.is_some() {
        Some(MOSQUITTO_NEEDS_CREDENTIALS)
    } else if crate::server::mqtt::serves_tls(spec) {
        Some(MOSQUITTO_NEEDS_CA)
    } else {
        None
    }
}

/// Why a mosquitto reading has no CPU figure.
pub const MOSQUITTO_NO_CPU: &str = "mosquitto's $SYS tree reports no process CPU";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sys_is_closed_by_a_login_or_by_tls() {
        let spec = |s: &str| -> MqttBrokerSpec { serde_norway::from_str(s).unwrap() };
        assert_eq!(mosquitto_sys_closed(&spec("{}")), None);
        let tls = "tls: {secretName: t}";
        assert_eq!(
            mosquitto_sys_closed(&spec(&format!("{{{tls}}}"))),
            Some(MOSQUITTO_NEEDS_CA)
        );
        assert_eq!(
            mosquitto_sys_closed(&spec(&format!("{{auth: {{secretName: u}}, {tls}}}"))),
            Some(MOSQUITTO_NEEDS_CREDENTIALS)
        );
    }
}
