//! One server pod's reading, whichever endpoint it came from.

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

/// Why a mosquitto reading has no CPU figure.
pub const MOSQUITTO_NO_CPU: &str = "mosquitto's $SYS tree reports no process CPU";
