//! The readable table printed after a run, by `report` and by `merge`.
use runner_api::histo::LatencyPercentiles;
use runner_api::result::{RunnerResult, SegmentStats};
use std::fmt::Write;

pub fn render(r: &RunnerResult) -> String {
    let mut s = String::new();
    let w = &r.workload;
    let _ = writeln!(
        s,
        "msgbench {:?} → {}  runners {:?}  pubs {} subs {} topics {} payload {} B  rate/pub {}",
        w.protocol,
        r.target,
        r.runner_ids,
        w.publishers,
        w.subscribers,
        w.topics,
        w.payload_bytes,
        w.rate_per_publisher
            .map_or("unlimited (closed loop)".to_string(), |x| format!("{x}/s")),
    );
    if r.connections.is_some() {
        connections(&mut s, r);
    } else {
        messaging(&mut s, r);
        let _ = writeln!(
            s,
            "recv/s: first → last delivery per subscriber; deliv/s: unique deliveries over first send → last delivery"
        );
    }
    for e in &r.rest {
        let _ = writeln!(
            s,
            "REST GET {}: {} requests, {} errors{}",
            e.path,
            e.requests,
            e.errors,
            e.summary
                .as_ref()
                .map_or(String::new(), |l| format!("; latency {}", lat(l)))
        );
    }
    generator(&mut s, r);
    s
}

/// A connection workload: how many opened how fast, and the connect time.
fn connections(s: &mut String, r: &RunnerResult) {
    let Some(c) = &r.connections else { return };
    let _ = writeln!(
        s,
        "connections: {} of {} opened in {:.3} s = {:.1}/s, {} failed, held {:.1} s",
        c.connected,
        c.attempted,
        c.connect_seconds,
        c.connections_per_second,
        c.failed,
        c.held_seconds
    );
    if let Some(l) = &c.connect_time_summary {
        let _ = writeln!(s, "connect time: {}", lat(l));
    }
    for (k, v) in &c.errors {
        let _ = writeln!(s, "  error {k}: {v}");
    }
}

/// A messaging workload: a row per phase, the stages' loads, and the measured latencies.
fn messaging(s: &mut String, r: &RunnerResult) {
    let _ = writeln!(
        s,
        "{:<12} {:>11} {:>11} {:>12} {:>12} {:>12} {:>9} {:>6} {:>5} {:>6} {:>9} {:>9} {:>9} {:>9}",
        "phase",
        "published",
        "received",
        "pub/s",
        "recv/s",
        "deliv/s",
        "delivered",
        "dup",
        "ooo",
        "errors",
        "p50 µs",
        "p99 µs",
        "p99.9 µs",
        "max µs"
    );
    for p in (r.warmup.iter())
        .chain(r.sessions.iter())
        .chain(r.stages.iter())
        .chain([&r.measured])
    {
        row(s, p);
    }
    stage_loads(s, r);
    let m = &r.measured.summary;
    if let Some(l) = &m.latency {
        let _ = writeln!(s, "end-to-end latency (from intended send): {}", lat(l));
    }
    if let Some(l) = &m.ack_latency {
        let _ = writeln!(s, "publish ack latency: {}", lat(l));
    }
    if let Some(l) = &m.send_lag {
        let _ = writeln!(s, "send lag: {}", lat(l));
    }
    for (k, v) in &r.measured.errors {
        let _ = writeln!(s, "  error {k}: {v}");
    }
    if let Some(b) = &r.breaking_stage {
        let _ = writeln!(s, "stages stopped at {b} (threshold broken)");
    }
}

/// The runner's own cost, and whether it kept its schedule.
fn generator(s: &mut String, r: &RunnerResult) {
    let g = &r.generator;
    let _ = writeln!(
        s,
        "runner CPU {:.2} s over {:.2} s wall ({:.3} CPU-s per million messages){}{}",
        g.cpu_seconds,
        g.wall_seconds,
        g.cpu_seconds_per_million_messages,
        if g.closed_loop {
            "  CLOSED LOOP (no rate): latency includes generator queueing"
        } else {
            ""
        },
        if g.saturated {
            "  GENERATOR SATURATED"
        } else {
            ""
        }
    );
    for reason in &g.reasons {
        let _ = writeln!(s, "  saturated: {reason}");
    }
}

/// What each stage offered: rate per publisher and publishers, with a ramp's end value.
fn stage_loads(s: &mut String, r: &RunnerResult) {
    use msgbench_crds::workload::StageDimension;
    let dim = r.workload.stages.as_ref().map(|st| st.dimension);
    for p in &r.stages {
        let rate = p
            .rate_per_publisher
            .map_or("unlimited".to_string(), |x| x.to_string());
        let load = match (dim, p.ramp_to) {
            (Some(StageDimension::Rate), Some(to)) => {
                format!("{rate} → {to} msg/s per publisher × {}", p.publishers)
            }
            (Some(StageDimension::Connections), Some(to)) => {
                format!("{rate} msg/s per publisher × {} → {to}", p.publishers)
            }
            _ => format!("{rate} msg/s per publisher × {}", p.publishers),
        };
        let _ = writeln!(s, "  {}: {load} publishers", p.name);
    }
}

fn row(s: &mut String, p: &SegmentStats) {
    let m = &p.summary;
    let l = m.latency.as_ref();
    let f = |x: Option<u64>| x.map_or("-".to_string(), |v| v.to_string());
    let _ = writeln!(
        s,
        "{:<12} {:>11} {:>11} {:>12.1} {:>12.1} {:>12.1} {:>9.4} {:>6} {:>5} {:>6} {:>9} {:>9} {:>9} {:>9}",
        p.name,
        p.published,
        p.received,
        m.publish_rate,
        m.receive_rate,
        m.delivery_rate,
        m.delivered_ratio,
        p.duplicates,
        p.out_of_order,
        m.errors,
        f(l.map(|l| l.p50_us)),
        f(l.map(|l| l.p99_us)),
        f(l.map(|l| l.p999_us)),
        f(l.map(|l| l.max_us)),
    );
}

fn lat(l: &LatencyPercentiles) -> String {
    format!(
        "n={} p50 {} µs  p90 {} µs  p99 {} µs  p99.9 {} µs  max {} µs  mean {:.1} µs  sd {:.1} µs",
        l.count, l.p50_us, l.p90_us, l.p99_us, l.p999_us, l.max_us, l.mean_us, l.stddev_us
    )
}
