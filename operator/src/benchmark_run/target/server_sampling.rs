//! Samples the target's server pods over their own monitoring endpoints (nats `/varz`,
//! pubsub-server `/health`, mosquitto's `$SYS` over MQTT), and an endpoint target's NATS
//! servers at the monitoring URLs it names: the client half of
//! `msgbench_operator_core::run::results::server_usage`, which says when a sample is due, which URLs
//! are read, and turns readings into status.
mod monitoring;
mod mosquitto_sys;

use crate::runtime::context::Context;
use kube::Api;
use monitoring::{endpoint, read_pods, read_servers};
use msgbench_crds::benchmark_run::{BenchmarkRun, BenchmarkRunStatus, Endpoint, ServerKind};
use msgbench_crds::MqttBroker;
use msgbench_operator_core::run::results::server_usage::endpoint::{self as monitored, Plan};
use msgbench_operator_core::run::results::server_usage::{
    mosquitto_sys_closed, sample_due, UsageRead, MOSQUITTO_NEEDS_CA, MOSQUITTO_NEEDS_CREDENTIALS,
};

/// Why no server is read when the operator runs with `--no-varz`.
const NO_VARZ: &str = "the operator runs with --no-varz (pod IPs not reachable)";

/// Reads the target's server pods when a sample is due (`None`: not due). Best effort: an
/// unreachable pod only drops out of this sample.
pub async fn read(
    ctx: &Context,
    br: &BenchmarkRun,
    ns: &str,
    st: &BenchmarkRunStatus,
    now_ms: i64,
) -> Option<UsageRead> {
    let unavailable = |source: &str, why: String| {
        Some(UsageRead::Unavailable {
            source: source.into(),
            why,
        })
    };
    let Some(r) = &br.spec.target.server_ref else {
        let ep = br.spec.target.endpoint.as_ref()?;
        return read_endpoint(ctx, ep, st, now_ms).await;
    };
    let (source, port_name, reader) = endpoint(r.kind, br.spec.workload.protocol);
    if !ctx.observe_varz {
        return unavailable(source, NO_VARZ.into());
    }
    if r.kind == ServerKind::MqttBroker {
        if [MOSQUITTO_NEEDS_CREDENTIALS, MOSQUITTO_NEEDS_CA]
            .iter()
            .any(|why| recorded_unavailable(st, why))
        {
            return None; // the status keeps it: no need to look again
        }
        if let Some(why) = sys_closed(ctx, ns, &r.name).await {
            return unavailable(source, why.into());
        }
    }
    if !sample_due(st, now_ms) {
        return None;
    }
    let (listed, (readings, failed)) = read_pods(ctx, ns, r.kind, &r.name, port_name, reader).await;
    Some(UsageRead::Readings {
        source: source.into(),
        path: reader.what().into(),
        listed,
        readings,
        failed,
        now_ms,
    })
}

/// An endpoint target: its servers' `/varz` at the monitoring URLs it names (checked again
/// here, never read otherwise), or why there are no figures.
async fn read_endpoint(
    ctx: &Context,
    ep: &Endpoint,
    st: &BenchmarkRunStatus,
    now_ms: i64,
) -> Option<UsageRead> {
    let (servers, refused) = match monitored::plan(ep) {
        Plan::Unavailable(why) => {
            return Some(UsageRead::Unavailable {
                source: "none".into(),
                why,
            })
        }
        Plan::Read { servers, refused } => (servers, refused),
    };
    if !ctx.observe_varz {
        return Some(UsageRead::Unavailable {
            source: monitored::SOURCE.into(),
            why: NO_VARZ.into(),
        });
    }
    if !sample_due(st, now_ms) {
        return None;
    }
    let listed = servers.len() + refused.len();
    let (readings, mut failed) = read_servers(&servers).await;
    failed.extend(refused);
    Some(UsageRead::Readings {
        source: monitored::SOURCE.into(),
        path: "/varz".into(),
        listed,
        readings,
        failed,
        now_ms,
    })
}

/// Why the broker's `$SYS` tree is closed to the operator, if it is (`mosquitto_sys_closed`:
/// a login, or TLS whose CA is in a Secret; the operator never reads Secrets). Best effort: a
/// failed read lets the sample try (and drop out).
async fn sys_closed(ctx: &Context, ns: &str, name: &str) -> Option<&'static str> {
    let got = Api::<MqttBroker>::namespaced(ctx.client.clone(), ns)
        .get_opt(name)
        .await;
    match got {
        Ok(b) => b.and_then(|b| mosquitto_sys_closed(&b.spec)),
        Err(e) => {
            tracing::debug!(error = %e, "reading the MqttBroker for usage");
            None
        }
    }
}

fn recorded_unavailable(st: &BenchmarkRunStatus, why: &str) -> bool {
    (st.server_usage.as_ref()).is_some_and(|u| u.unavailable.as_deref() == Some(why))
}

#[cfg(test)]
mod tests {
    use super::*;
    use msgbench_operator_core::run::results::server_usage::apply;

    /// A broker with auth: the figures are unavailable, saying why, and once the status says
    /// so the broker is not looked at again.
    #[test]
    fn a_broker_with_credentials_is_reported_unavailable_once() {
        let mut st = BenchmarkRunStatus::default();
        assert!(!recorded_unavailable(&st, MOSQUITTO_NEEDS_CREDENTIALS));
        let read = UsageRead::Unavailable {
            source: "mosquitto $SYS heap".into(),
            why: MOSQUITTO_NEEDS_CREDENTIALS.into(),
        };
        apply(&mut st, &read, true, false);
        let u = st.server_usage.as_ref().unwrap();
        assert_eq!(u.unavailable.as_deref(), Some(MOSQUITTO_NEEDS_CREDENTIALS));
        assert!(u.unavailable.as_deref().unwrap().contains("credentials"));
        assert!(recorded_unavailable(&st, MOSQUITTO_NEEDS_CREDENTIALS));
    }
}
