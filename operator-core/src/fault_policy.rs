//! Which fault agents the operator may add to server pods. A server's `spec.faultInjection`
//! asks; the install decides: the chart's `faults.enabled` (`--allow-faults`) allows agents at
//! all, its `faults.network` (`--allow-network-faults`) also agents that partition, which run as
//! uid 0 with NET_ADMIN and KILL, its `faults.powerLoss` (`--allow-power-loss-faults`) also
//! servers under the lazy file system, whose container runs privileged. Otherwise whoever may
//! create a JetStreamCluster would get a root NET_ADMIN (or privileged) container where the
//! chart says faults are off.
//!
//! A request is granted whole or not at all: an agent without the network faults asked for
//! would fail, mid-run, the runs that need them.
use msgbench_crds::benchmark_run::FaultAgentSpec;
use msgbench_crds::conditions::FAULT_INJECTION_NOT_ALLOWED;

/// What the operator's install allows (off by default, as in the chart).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FaultPolicy {
    /// Chart `faults.enabled`: fault agents (crash, pause) and BenchmarkRun faults.
    pub agents: bool,
    /// Chart `faults.network`: agents that may also partition (needs `agents` too).
    pub network: bool,
    /// Chart `faults.powerLoss`: servers whose store is under the lazy file system, in a
    /// privileged container (needs `agents` too).
    pub power_loss: bool,
}

/// A `spec.faultInjection` the install does not allow: the server's Degraded reason and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FaultRefusal {
    /// [`FAULT_INJECTION_NOT_ALLOWED`].
    pub reason: &'static str,
    /// Names the field and the chart values that would allow it.
    pub message: String,
}

impl FaultRefusal {
    /// `field` needs the chart values `missing` (each `=true`); `instead`: the spec's way out.
    pub fn not_allowed(field: &str, missing: &[&str], instead: &str) -> Self {
        let values = (missing.iter())
            .map(|v| format!("{v}=true"))
            .collect::<Vec<_>>()
            .join(" and ");
        let (noun, pronoun) = match missing.len() {
            1 => ("value", "it"),
            _ => ("values", "them"),
        };
        Self {
            reason: FAULT_INJECTION_NOT_ALLOWED,
            message: format!(
                "{field} needs the chart {noun} {values}, which the operator was installed \
                 without: the server runs without a fault agent (install with {pronoun}, or \
                 {instead})"
            ),
        }
    }
}

impl FaultPolicy {
    /// The agent `spec` asks for when the install allows all of it; `Ok(None)`: none asked.
    pub fn admit<'a>(
        &self,
        spec: Option<&'a FaultAgentSpec>,
    ) -> Result<Option<&'a FaultAgentSpec>, FaultRefusal> {
        let Some(spec) = spec.filter(|s| s.enabled) else {
            return Ok(None);
        };
        let mut missing = Vec::new();
        if !self.agents {
            missing.push("faults.enabled");
        }
        if spec.network && !self.network {
            missing.push("faults.network");
        }
        if spec.power_loss && !self.power_loss {
            missing.push("faults.powerLoss");
        }
        match missing.as_slice() {
            [] => Ok(Some(spec)),
            ["faults.powerLoss"] => Err(FaultRefusal::not_allowed(
                "spec.faultInjection.powerLoss",
                &missing,
                "set spec.faultInjection.powerLoss: false",
            )),
            // Only the network part is refused: name that field, not the whole agent.
            ["faults.network"] => Err(FaultRefusal::not_allowed(
                "spec.faultInjection.network",
                &missing,
                "set spec.faultInjection.network: false for crash and pause only",
            )),
            _ => Err(FaultRefusal::not_allowed(
                "spec.faultInjection",
                &missing,
                "remove spec.faultInjection",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(enabled: bool, network: bool) -> FaultAgentSpec {
        FaultAgentSpec {
            enabled,
            network,
            power_loss: false,
        }
    }

    #[test]
    fn nothing_asked_is_never_refused() {
        let off = FaultPolicy::default();
        assert_eq!(off.admit(None), Ok(None));
        assert_eq!(off.admit(Some(&spec(false, false))), Ok(None));
    }

    #[test]
    fn faults_off_refuse_any_agent_and_name_the_chart_value() {
        let off = FaultPolicy::default();
        let r = off.admit(Some(&spec(true, false))).unwrap_err();
        assert_eq!(r.reason, "FaultInjectionNotAllowed");
        assert!(r.message.contains("spec.faultInjection "), "{}", r.message);
        assert!(
            r.message.contains("faults.enabled=true") && !r.message.contains("faults.network"),
            "{}",
            r.message
        );
        let r = off.admit(Some(&spec(true, true))).unwrap_err();
        assert!(
            r.message
                .contains("faults.enabled=true and faults.network=true"),
            "{}",
            r.message
        );
    }

    #[test]
    fn a_network_agent_needs_faults_network_too() {
        let agents = FaultPolicy {
            agents: true,
            ..FaultPolicy::default()
        };
        let plain = spec(true, false);
        assert_eq!(agents.admit(Some(&plain)), Ok(Some(&plain)));
        let r = agents.admit(Some(&spec(true, true))).unwrap_err();
        assert!(
            r.message.starts_with("spec.faultInjection.network ")
                && r.message.contains("faults.network=true")
                && !r.message.contains("faults.enabled"),
            "{}",
            r.message
        );
        let all = FaultPolicy {
            agents: true,
            network: true,
            power_loss: false,
        };
        let net = spec(true, true);
        assert_eq!(all.admit(Some(&net)), Ok(Some(&net)));
        // faults.network alone allows nothing: the agent itself needs faults.enabled.
        let network_only = FaultPolicy {
            agents: false,
            network: true,
            power_loss: false,
        };
        assert!(network_only.admit(Some(&net)).is_err());
    }

    #[test]
    fn a_power_loss_store_needs_faults_power_loss_too() {
        let lazy = FaultAgentSpec {
            enabled: true,
            network: false,
            power_loss: true,
        };
        let agents = FaultPolicy {
            agents: true,
            ..FaultPolicy::default()
        };
        let r = agents.admit(Some(&lazy)).unwrap_err();
        assert!(
            r.message.starts_with("spec.faultInjection.powerLoss ")
                && r.message.contains("faults.powerLoss=true")
                && !r.message.contains("faults.enabled"),
            "{}",
            r.message
        );
        let allowed = FaultPolicy {
            agents: true,
            power_loss: true,
            ..FaultPolicy::default()
        };
        assert_eq!(allowed.admit(Some(&lazy)), Ok(Some(&lazy)));
        // faults.powerLoss alone allows nothing: the agent itself needs faults.enabled.
        let power_only = FaultPolicy {
            power_loss: true,
            ..FaultPolicy::default()
        };
        assert!(power_only.admit(Some(&lazy)).is_err());
    }
}
