//! Why a BenchmarkRun failed: the one vocabulary of `status.verdict.reason` (and the reason of
//! the Complete, Succeeded and Stalled conditions) when the phase is Failed. The operator sets
//! a reason only through this type; the Argo CD health script's list is generated from
//! [`RunFailureReason::ALL`], and the user guide's table and troubleshooting page are checked
//! against it. The wire strings never change: CI gates, alerts and dashboards match on them.
use std::fmt;
use std::str::FromStr;

/// Why a run ended Failed: a spec generation fails at most once, with the first cause the
/// operator meets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RunFailureReason {
    /// The spec breaks a rule admission did not enforce (a run stored before the rule, a
    /// variant's merged workload, a name past the label limits, more results than a run may
    /// hold, an agent config that cannot be written). Set before any pod exists.
    InvalidSpec,
    /// `spec.faults` is set but the operator was installed without the permission to delete
    /// pods (Helm value `faults.enabled=true` grants it).
    FaultsNotAllowed,
    /// A target (the run's server or a variant's) still does not exist
    /// `targetReadyTimeoutSeconds` after the run was accepted.
    TargetNotFound,
    /// A target exists but is still not Ready `targetReadyTimeoutSeconds` after the run was
    /// accepted.
    TargetNotReady,
    /// A target, as specified, cannot serve the run: its protocol, or the faults the run asks
    /// for (no fault agent, no network faults, no peers to partition from). No wait mends it,
    /// so the run fails at once.
    TargetUnfit,
    /// The target's Service listed no ready endpoint on the run's port within
    /// `targetReadyTimeoutSeconds`, or a runner could not connect within
    /// `connectTimeoutSeconds` before the start barrier.
    TargetUnreachable,
    /// A runner's credentials for the target were refused (NATS `Authorization Violation`,
    /// an MQTT CONNACK refusing the login, HTTP 401/403 on a WebSocket upgrade or Socket.IO
    /// handshake), or are unusable as given. Retrying cannot mend it, so the run fails at once.
    TargetAuthFailed,
    /// TLS with the target failed: its certificate is not trusted by the CA given (or the
    /// public roots), has expired, or names another host; it does not speak TLS on that port;
    /// or the CA, client certificate or key given for it cannot be used. The message names
    /// the certificate the target presented and why it was refused.
    TargetTLSFailed,
    /// The target refused the protocol version the runner speaks (MQTT CONNACK 1, or 0x84
    /// in MQTT 5).
    TargetProtocolRefused,
    /// Runs whose `baselineRef`s wait for each other's verdict in a cycle; each would wait
    /// until its deadline, so they fail at once.
    BaselineCycle,
    /// The kubelet cannot pull a runner image: still failing 40 s after the pod was created,
    /// or at once for a reference no retry can mend (invalid name, pulls turned off).
    ImagePullFailed,
    /// Not every runner reached the start barrier within its bound (barrierTimeoutSeconds +
    /// connectTimeoutSeconds + the pod-start grace), or a runner's own barrier timed out.
    BarrierTimeout,
    /// At the barrier's bound a runner pod was still one no node would take; the message is
    /// the scheduler's.
    RunnersUnschedulable,
    /// A runner pod failed for any other reason (its exit code and last words, out of memory,
    /// deleted, or its Job failed).
    RunnerFailed,
    /// A runner's node stopped reporting: its runner cannot finish, and a new one would start
    /// apart from the others, so there is no retry.
    RunnerNodeLost,
    /// Runners would start, or their records show they started, more than 0.5 s apart: their
    /// load was not concurrent and is not merged as such.
    RunnersStartedApart,
    /// The run did not finish within `activeDeadlineSeconds` (the operator's bound or its
    /// runner Job's).
    DeadlineExceeded,
    /// Runner results cannot be read intact or merged (pods gone before collection, a damaged
    /// record, nothing left after merging).
    ResultsLost,
    /// A runner offered more results than a run may hold in the operator's memory.
    ResultsTooLarge,
    /// A fault in `spec.faults` was not carried out; the figures are kept, without the fault.
    FaultsNotInjected,
    /// A fault may have been carried out but nobody can say: the fault agent's report was lost
    /// (it restarted, or its pod was replaced, after an ask that may have reached it) and no
    /// evidence (restart count, the agent's nftables table, the process state) confirmed it
    /// (`status.faults[].reportLost`). The figures are kept; whether they include the fault is
    /// not known.
    FaultsUnconfirmed,
    /// A threshold of severity `fail` did not hold (warn thresholds never fail a run).
    ThresholdsNotMet,
}

use RunFailureReason::*;

impl RunFailureReason {
    /// Every reason, in the order a run meets them (spec, target, runners, results, verdict).
    pub const ALL: &'static [RunFailureReason] = &[
        InvalidSpec,
        FaultsNotAllowed,
        TargetNotFound,
        TargetNotReady,
        TargetUnfit,
        TargetUnreachable,
        TargetAuthFailed,
        TargetTLSFailed,
        TargetProtocolRefused,
        BaselineCycle,
        ImagePullFailed,
        BarrierTimeout,
        RunnersUnschedulable,
        RunnerFailed,
        RunnerNodeLost,
        RunnersStartedApart,
        DeadlineExceeded,
        ResultsLost,
        ResultsTooLarge,
        FaultsNotInjected,
        FaultsUnconfirmed,
        ThresholdsNotMet,
    ];

    /// The reason as it is written to status.
    pub const fn as_str(self) -> &'static str {
        match self {
            InvalidSpec => "InvalidSpec",
            FaultsNotAllowed => "FaultsNotAllowed",
            TargetNotFound => "TargetNotFound",
            TargetNotReady => "TargetNotReady",
            TargetUnfit => "TargetUnfit",
            TargetUnreachable => "TargetUnreachable",
            TargetAuthFailed => "TargetAuthFailed",
            TargetTLSFailed => "TargetTLSFailed",
            TargetProtocolRefused => "TargetProtocolRefused",
            BaselineCycle => "BaselineCycle",
            ImagePullFailed => "ImagePullFailed",
            BarrierTimeout => "BarrierTimeout",
            RunnersUnschedulable => "RunnersUnschedulable",
            RunnerFailed => "RunnerFailed",
            RunnerNodeLost => "RunnerNodeLost",
            RunnersStartedApart => "RunnersStartedApart",
            DeadlineExceeded => "DeadlineExceeded",
            ResultsLost => "ResultsLost",
            ResultsTooLarge => "ResultsTooLarge",
            FaultsNotInjected => "FaultsNotInjected",
            FaultsUnconfirmed => "FaultsUnconfirmed",
            ThresholdsNotMet => "ThresholdsNotMet",
        }
    }
}

impl fmt::Display for RunFailureReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A reason string that is none of [`RunFailureReason::ALL`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown run failure reason {0:?}")]
pub struct UnknownFailureReason(pub String);

impl FromStr for RunFailureReason {
    type Err = UnknownFailureReason;

    /// The exact wire string (case-sensitive, as status carries it).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .iter()
            .copied()
            .find(|r| r.as_str() == s)
            .ok_or_else(|| UnknownFailureReason(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn every_reason_is_listed_once_and_parses_back() {
        let names: BTreeSet<&str> = RunFailureReason::ALL.iter().map(|r| r.as_str()).collect();
        assert_eq!(
            names.len(),
            RunFailureReason::ALL.len(),
            "a wire string twice"
        );
        for r in RunFailureReason::ALL {
            assert_eq!(r.as_str().parse::<RunFailureReason>(), Ok(*r));
            assert_eq!(r.to_string(), r.as_str());
        }
        assert!("thresholdsNotMet".parse::<RunFailureReason>().is_err());
        assert!("".parse::<RunFailureReason>().is_err());
    }

    /// ALL is written by hand: a variant missing from it would escape every check built on it.
    #[test]
    fn all_holds_every_variant() {
        for r in RunFailureReason::ALL {
            // A new variant makes this match non-exhaustive: add it to ALL, then here.
            match r {
                InvalidSpec
                | FaultsNotAllowed
                | TargetNotFound
                | TargetNotReady
                | TargetUnfit
                | TargetUnreachable
                | TargetAuthFailed
                | TargetTLSFailed
                | TargetProtocolRefused
                | BaselineCycle
                | ImagePullFailed
                | BarrierTimeout
                | RunnersUnschedulable
                | RunnerFailed
                | RunnerNodeLost
                | RunnersStartedApart
                | DeadlineExceeded
                | ResultsLost
                | ResultsTooLarge
                | FaultsNotInjected
                | FaultsUnconfirmed
                | ThresholdsNotMet => {}
            }
        }
        assert_eq!(RunFailureReason::ALL.len(), 22);
    }
}
