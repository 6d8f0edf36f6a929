//! Samples the target's server pods over their own monitoring endpoints (nats `/varz`,
//! pubsub-server `/health`, mosquitto's `$SYS` over MQTT): the client half of
//! `msgbench_operator_core::run::server_usage`, which says when a sample is due and turns
//! readings into status.
mod monitoring;
mod mosquitto_sys;

use crate::runtime::context::Context;
use monitoring::{endpoint, read_pods};
use msgbench_crds::benchmark_run::{BenchmarkRun, BenchmarkRunStatus};
use msgbench_operator_core::run::server_usage::{sample_due, UsageRead};

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
        return unavailable(
            "none",
            "the target is an endpoint: its servers are not managed here".into(),
        );
    };
    let (source, port_name, reader) = endpoint(r.kind, br.spec.workload.protocol);
    if !ctx.observe_varz {
        return unavailable(
            source,
            "the operator runs with --no-varz (pod IPs not reachable)".into(),
        );
    }
    if !sample_due(st, now_ms) {
        return None;
    }
    let (listed, readings) = read_pods(ctx, ns, r.kind, &r.name, port_name, reader).await;
    Some(UsageRead::Readings {
        source: source.into(),
        path: reader.what().into(),
        listed,
        readings,
        now_ms,
    })
}
