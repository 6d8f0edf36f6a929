//! Server CPU and memory during a run, read from each server pod's own monitoring endpoint:
//! nats `/varz` (`cpu` in % of one core, `mem` = RSS, `connections`) and pubsub-server
//! `/health` (`cpu_seconds` counter, `rss_bytes`, `clients`), mosquitto's `$SYS` heap and
//! client count over MQTT (no CPU: the status says so instead of a zero). No kubelet or
//! metrics-server access is needed, so no RBAC beyond listing pods. Accumulators live in status (see
//! `msgbench_crds::server_usage`), so an operator restart continues the same sums.
//! Memory per connection is a fit over (connections, memory) points: see `memory_fit`. An
//! endpoint target's servers are read at the URLs its `monitoring` names: see `endpoint`.
pub mod endpoint;
mod memory_fit;
mod read_errors;
mod sample;

use crate::status_text::plain_bounded;
use msgbench_crds::benchmark_run::BenchmarkRunStatus;
use msgbench_crds::server_usage::{
    MemoryPoint, PodUsage, ServerUsage, MAX_SERVER_PODS, MAX_SERVER_VERSION,
};
pub use sample::{
    mosquitto_sys_closed, Cpu, Sample, MOSQUITTO_NEEDS_CA, MOSQUITTO_NEEDS_CREDENTIALS,
    MOSQUITTO_NO_CPU,
};

/// How often the servers are sampled. Every sample is a status write (the accumulators live
/// in status so a restarted operator continues them), so this is also how often a running
/// run's status changes: `status.progress` is written with it.
pub const SAMPLE_EVERY_MS: i64 = 5_000;

/// Whether the servers are due for a sample at `now_ms`: the schedule is kept in status (each
/// pod's last sample time, and each failed server's last failure, so servers that do not
/// answer are not asked at every pass), so a restarted operator keeps it.
pub fn sample_due(st: &BenchmarkRunStatus, now_ms: i64) -> bool {
    let last = st
        .server_usage
        .iter()
        .flat_map(|u| {
            let answered = u.pods.iter().filter_map(|p| p.last_sample_ms);
            answered.chain(u.read_errors.iter().filter_map(|e| e.last_failed_ms))
        })
        .max();
    last.is_none_or(|t| now_ms - t >= SAMPLE_EVERY_MS)
}

fn pod_entry<'a>(u: &'a mut ServerUsage, pod: &str) -> Option<&'a mut PodUsage> {
    if let Some(i) = u.pods.iter().position(|p| p.pod == pod) {
        return u.pods.get_mut(i);
    }
    if u.pods.len() >= MAX_SERVER_PODS {
        return None;
    }
    u.pods.push(PodUsage {
        pod: pod.to_string(),
        ..PodUsage::default()
    });
    u.pods.last_mut()
}

/// All pods' connections and memory at one instant: only when every listed pod answered and
/// reported its connection count (a partial sum would be an outlier).
fn instant_point(readings: &[(String, Sample)], all_answered: bool) -> Option<MemoryPoint> {
    if !all_answered || readings.is_empty() {
        return None;
    }
    let mut p = MemoryPoint::default();
    for (_, s) in readings {
        p.connections += s.connections?;
        p.memory_bytes += s.rss_bytes;
    }
    Some(p)
}

/// Connection workloads: this instant's (connections, memory) point for the fit. Before the
/// barrier release the latest point is the baseline; after it, points accumulate.
/// `all_answered`: every server pod listed answered this time.
pub fn record_point(
    u: &mut ServerUsage,
    readings: &[(String, Sample)],
    all_answered: bool,
    released: bool,
) {
    let Some(p) = instant_point(readings, all_answered) else {
        return;
    };
    if released {
        memory_fit::add_point(
            &mut u.memory_points,
            &mut u.memory_point_stride,
            u.samples,
            p,
        );
    } else {
        u.memory_points = vec![p];
        u.memory_point_stride = None;
    }
}

/// The server's own version at its latest sample, when it reports one.
fn record_version(p: &mut PodUsage, s: &Sample) {
    if let Some(v) = &s.version {
        p.version = Some(plain_bounded(v, MAX_SERVER_VERSION));
    }
}

/// Before the barrier release: memory and connections at rest (the latest reading wins).
pub fn record_baseline(u: &mut ServerUsage, readings: &[(String, Sample)], now_ms: i64) {
    for (pod, s) in readings {
        let Some(p) = pod_entry(u, pod) else { continue };
        record_version(p, s);
        p.memory_bytes_baseline = Some(s.rss_bytes);
        p.connections_baseline = s.connections;
        p.last_sample_ms = Some(now_ms);
        p.last_cpu_seconds = match s.cpu {
            Cpu::Seconds(x) => Some(x),
            Cpu::Cores(_) | Cpu::Unreported(_) => None,
        };
    }
}

/// While the load runs: one sampling instant over all pods.
pub fn record(u: &mut ServerUsage, readings: &[(String, Sample)], now_ms: i64) {
    let (mut cores_now, mut rss_now, mut no_cpu) = (None, 0u64, None);
    for (pod, s) in readings {
        let Some(p) = pod_entry(u, pod) else { continue };
        let dt = p
            .last_sample_ms
            .map_or(0.0, |t| (now_ms - t).max(0) as f64 / 1000.0);
        let cores = match s.cpu {
            Cpu::Cores(c) => {
                p.cpu_core_seconds += c * dt;
                p.sampled_seconds += dt;
                Some(c)
            }
            Cpu::Seconds(x) => match p.last_cpu_seconds {
                // A counter that went back means the process restarted: start over from here.
                Some(prev) if dt > 0.0 && x >= prev => {
                    p.cpu_core_seconds += x - prev;
                    p.sampled_seconds += dt;
                    Some((x - prev) / dt)
                }
                _ => None,
            },
            Cpu::Unreported(why) => {
                no_cpu = Some(why);
                None
            }
        };
        if let Cpu::Seconds(x) = s.cpu {
            p.last_cpu_seconds = Some(x);
        }
        record_version(p, s);
        p.last_sample_ms = Some(now_ms);
        p.samples += 1;
        p.memory_bytes_max = p.memory_bytes_max.max(s.rss_bytes);
        if let Some(c) = s.connections {
            p.connections_max = Some(p.connections_max.unwrap_or(0).max(c));
        }
        if let Some(c) = cores {
            p.cpu_cores_max = Some(p.cpu_cores_max.unwrap_or(0.0).max(c));
            cores_now = Some(cores_now.unwrap_or(0.0) + c);
        }
        rss_now += s.rss_bytes;
    }
    if !readings.is_empty() {
        u.samples += 1;
        if let Some(c) = cores_now {
            u.cpu_cores_max = Some(u.cpu_cores_max.unwrap_or(0.0).max(c));
        }
        if let Some(why) = no_cpu {
            u.cpu_unavailable = Some(why.into());
        }
        u.memory_bytes_max = Some(u.memory_bytes_max.unwrap_or(0).max(rss_now));
    }
}

/// Derived figures: means, total baseline and, for connection workloads, memory per
/// connection (the fit over the points, or why it is unavailable).
pub fn summarize(u: &mut ServerUsage, connection_workload: bool) {
    for p in &mut u.pods {
        p.cpu_cores_mean =
            (p.sampled_seconds > 0.0).then(|| p.cpu_core_seconds / p.sampled_seconds);
    }
    // A pod without a CPU figure makes the sum unknown, not smaller; no pod at all, too (an
    // empty sum would be 0).
    u.cpu_cores_mean = (!u.pods.is_empty())
        .then(|| u.pods.iter().map(|p| p.cpu_cores_mean).sum())
        .flatten();
    let baselines: Option<Vec<u64>> = u.pods.iter().map(|p| p.memory_bytes_baseline).collect();
    u.memory_bytes_baseline = baselines.filter(|b| !b.is_empty()).map(|b| b.iter().sum());
    (u.memory_bytes_per_connection, u.memory_per_connection_fit) = if connection_workload {
        let (bytes, fit) = memory_fit::decide(&u.memory_points);
        (bytes, Some(fit))
    } else {
        (None, None)
    };
}

fn unavailable(source: &str, why: String) -> ServerUsage {
    ServerUsage {
        source: source.into(),
        unavailable: Some(why),
        ..ServerUsage::default()
    }
}

/// What observing the target's servers gave this pass.
#[derive(Clone, Debug, PartialEq)]
pub enum UsageRead {
    /// Figures cannot be had for this target: the source and why.
    Unavailable { source: String, why: String },
    /// One sampling instant: how many server pods were listed, the readings of those that
    /// answered and the errors of those that did not (`path` for the message when none did).
    Readings {
        source: String,
        path: String,
        listed: usize,
        readings: Vec<(String, Sample)>,
        failed: Vec<(String, String)>,
        now_ms: i64,
    },
}

/// Pure: records one read into `st.serverUsage`; before the barrier release (`released`
/// false) as the baseline.
pub fn apply(
    st: &mut BenchmarkRunStatus,
    read: &UsageRead,
    released: bool,
    connection_workload: bool,
) {
    let (source, path, listed, readings, failed, now_ms) = match read {
        UsageRead::Unavailable { source, why } => {
            st.server_usage
                .get_or_insert_with(|| unavailable(source, why.clone()));
            return;
        }
        UsageRead::Readings {
            source,
            path,
            listed,
            readings,
            failed,
            now_ms,
        } => (source, path, *listed, readings, failed, *now_ms),
    };
    let u = st.server_usage.get_or_insert_with(|| ServerUsage {
        source: source.clone(),
        ..ServerUsage::default()
    });
    if released {
        record(u, readings, now_ms);
    } else {
        record_baseline(u, readings, now_ms);
    }
    if connection_workload {
        let all_answered = listed > 0 && readings.len() == listed;
        record_point(u, readings, all_answered, released);
    }
    read_errors::record(&mut u.read_errors, failed, now_ms);
    u.unavailable = (u.samples == 0 && released && readings.is_empty())
        .then(|| read_errors::none_answered(path, &u.read_errors));
    summarize(u, connection_workload);
}

/// After results merged: the usage becomes part of the result.
pub fn attach(st: &mut BenchmarkRunStatus) {
    if let Some(r) = st.result.as_mut() {
        if r.server_usage.is_none() {
            r.server_usage = st.server_usage.take();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sample_is_due_first_and_then_every_period_after_the_latest_pod() {
        let mut st = BenchmarkRunStatus::default();
        assert!(sample_due(&st, 1_000));
        let pod = |ms| PodUsage {
            last_sample_ms: Some(ms),
            ..PodUsage::default()
        };
        st.server_usage = Some(ServerUsage {
            pods: vec![pod(10_000), pod(12_000)],
            ..ServerUsage::default()
        });
        assert!(!sample_due(&st, 16_999), "the latest pod's sample counts");
        assert!(sample_due(&st, 12_000 + SAMPLE_EVERY_MS));
    }

    fn nats(cores: f64, rss: u64, conns: u64) -> Sample {
        Sample {
            cpu: Cpu::Cores(cores),
            rss_bytes: rss,
            connections: Some(conns),
            version: None,
        }
    }

    #[test]
    fn gauge_cpu_is_time_weighted_and_totals_are_per_instant() {
        let mut u = ServerUsage::default();
        record_baseline(
            &mut u,
            &[
                ("a".into(), nats(0.0, 100, 0)),
                ("b".into(), nats(0.0, 200, 0)),
            ],
            0,
        );
        // 2 s at a=1.0 b=0.5, then 6 s at a=0.2 b=0.2.
        record(
            &mut u,
            &[
                ("a".into(), nats(1.0, 150, 2)),
                ("b".into(), nats(0.5, 260, 2)),
            ],
            2_000,
        );
        record(
            &mut u,
            &[
                ("a".into(), nats(0.2, 400, 2)),
                ("b".into(), nats(0.2, 210, 2)),
            ],
            8_000,
        );
        summarize(&mut u, false);
        let a = &u.pods[0];
        assert_eq!(a.samples, 2);
        assert!((a.cpu_cores_mean.unwrap() - (1.0 * 2.0 + 0.2 * 6.0) / 8.0).abs() < 1e-9);
        assert_eq!(a.cpu_cores_max, Some(1.0));
        assert_eq!(a.memory_bytes_max, 400);
        assert_eq!(a.memory_bytes_baseline, Some(100));
        assert_eq!(u.samples, 2);
        assert!(
            (u.cpu_cores_max.unwrap() - 1.5).abs() < 1e-9,
            "{:?}",
            u.cpu_cores_max
        );
        // Peak of the sum at one instant (400 + 210), not the sum of peaks (400 + 260).
        assert_eq!(u.memory_bytes_max, Some(610));
        assert_eq!(u.memory_bytes_baseline, Some(300));
        assert!(
            u.memory_bytes_per_connection.is_none(),
            "messaging workload"
        );
    }

    #[test]
    fn counter_cpu_uses_differences_and_survives_a_restart() {
        let secs = |x: f64| Sample {
            cpu: Cpu::Seconds(x),
            rss_bytes: 1_000,
            connections: None,
            version: None,
        };
        let mut u = ServerUsage::default();
        record_baseline(&mut u, &[("p".into(), secs(10.0))], 0);
        record(&mut u, &[("p".into(), secs(13.0))], 4_000); // 0.75 cores
        record(&mut u, &[("p".into(), secs(0.5))], 6_000); // restarted: no CPU figure
        record(&mut u, &[("p".into(), secs(1.5))], 8_000); // 0.5 cores
        summarize(&mut u, false);
        let p = &u.pods[0];
        assert_eq!(p.samples, 3);
        assert!((p.cpu_core_seconds - 4.0).abs() < 1e-9);
        assert!((p.sampled_seconds - 6.0).abs() < 1e-9);
        assert!((p.cpu_cores_mean.unwrap() - 4.0 / 6.0).abs() < 1e-9);
        assert!((p.cpu_cores_max.unwrap() - 0.75).abs() < 1e-9);
    }

    #[test]
    fn a_server_without_a_cpu_figure_reports_none_and_why_never_zero() {
        let heap = |rss, c| Sample {
            cpu: Cpu::Unreported(MOSQUITTO_NO_CPU),
            rss_bytes: rss,
            connections: Some(c),
            version: None,
        };
        let mut u = ServerUsage::default();
        record_baseline(&mut u, &[("m".into(), heap(50_000, 0))], 0);
        record(&mut u, &[("m".into(), heap(900_000, 100))], 5_000);
        summarize(&mut u, false);
        assert_eq!((u.cpu_cores_mean, u.cpu_cores_max), (None, None));
        assert_eq!(u.cpu_unavailable.as_deref(), Some(MOSQUITTO_NO_CPU));
        assert_eq!(
            (u.pods[0].cpu_cores_mean, u.pods[0].cpu_cores_max),
            (None, None)
        );
        assert_eq!(u.memory_bytes_max, Some(900_000));
        let json = serde_json::to_value(&u).unwrap();
        assert!(json.get("cpuCoresMean").is_none(), "{json}");
    }

    /// Servers nobody could read have no memory figure at all, not a 0 that reads as "none used".
    #[test]
    fn unavailable_usage_has_no_memory_figure_never_zero() {
        let mut st = BenchmarkRunStatus::default();
        let read = UsageRead::Unavailable {
            source: "none".into(),
            why: "the target is an endpoint without monitoring.urls".into(),
        };
        apply(&mut st, &read, true, false);
        let json = serde_json::to_value(st.server_usage.as_ref().unwrap()).unwrap();
        assert!(json.get("memoryBytesMax").is_none(), "{json}");
        assert!(json["unavailable"]
            .as_str()
            .unwrap()
            .contains("monitoring.urls"));
    }

    #[test]
    fn memory_per_connection_is_the_slope_over_stepped_levels() {
        let mut u = ServerUsage::default();
        // Two pods: each point is their sum at one instant; 8,450 B per connection.
        let both = |c: u64| {
            let half = 5_000_000 + 8_450 * c / 2;
            [
                ("a".to_string(), nats(0.1, half, c / 2)),
                ("b".to_string(), nats(0.1, half, c / 2)),
            ]
        };
        let at = |u: &mut ServerUsage, r: &[(String, Sample)], all: bool, t: i64| {
            if t == 0 {
                record_baseline(u, r, t);
            } else {
                record(u, r, t);
            }
            record_point(u, r, all, t > 0);
        };
        at(&mut u, &both(0), true, 0);
        for (i, c) in [200, 200, 400, 400, 600, 600, 600].into_iter().enumerate() {
            at(&mut u, &both(c), true, 3_000 * (i as i64 + 1));
        }
        // A sample one pod missed, and the closing at the end, add no point.
        at(&mut u, &both(800)[..1], false, 30_000);
        at(&mut u, &both(0), true, 33_000);
        summarize(&mut u, true);
        assert_eq!(u.memory_points.len(), 8, "{:?}", u.memory_points);
        assert_eq!(u.memory_bytes_per_connection, Some(8_450.0));
        let fit = u.memory_per_connection_fit.clone().unwrap();
        assert_eq!((fit.points, fit.levels), (8, 4));
        assert_eq!(fit.r_squared, Some(1.0));
        // A messaging workload has no such figure.
        summarize(&mut u, false);
        assert!(u.memory_per_connection_fit.is_none());
        assert!(u.memory_bytes_per_connection.is_none());
    }

    #[test]
    fn one_level_of_connections_is_unavailable_never_zero() {
        // Issue 12: the server's memory fell under 300 connections opened at once.
        let mut u = ServerUsage::default();
        let a = |rss, c| [("a".to_string(), nats(0.1, rss, c))];
        record_baseline(&mut u, &a(35_600_000, 0), 0);
        record_point(&mut u, &a(35_600_000, 0), true, false);
        for (t, rss) in [(3_000, 33_800_000), (6_000, 33_700_000)] {
            record(&mut u, &a(rss, 300), t);
            record_point(&mut u, &a(rss, 300), true, true);
        }
        summarize(&mut u, true);
        assert_eq!(u.memory_bytes_per_connection, None);
        let why = u.memory_per_connection_fit.unwrap().unavailable.unwrap();
        assert!(why.contains("connections.steps"), "{why}");
    }

    /// An endpoint's three servers: the version each reports lands on its row; one that
    /// cannot be read is listed with its error and has no row (never a row of zeros); when
    /// none answers, `unavailable` names a server and its error.
    #[test]
    fn servers_report_their_version_and_one_that_fails_says_why() {
        let varz = |rss| Sample {
            version: Some("2.15.2".into()),
            ..nats(0.2, rss, 1)
        };
        let read = |readings: Vec<(String, Sample)>, failed: Vec<(String, String)>, t| {
            UsageRead::Readings {
                source: endpoint::SOURCE.into(),
                path: "/varz".into(),
                listed: 3,
                readings,
                failed,
                now_ms: t,
            }
        };
        let refused = || vec![("n2:8222".to_string(), "connection refused".to_string())];
        let mut st = BenchmarkRunStatus::default();
        let up = |rss| vec![("n0:8222".into(), varz(rss)), ("n1:8222".into(), varz(rss))];
        apply(&mut st, &read(up(100), refused(), 0), false, false);
        apply(&mut st, &read(up(300), refused(), 5_000), true, false);
        let u = st.server_usage.clone().unwrap();
        assert_eq!(u.source, "nats /varz (endpoint monitoring)");
        assert_eq!(u.unavailable, None);
        let rows: Vec<(&str, Option<&str>, u64)> = (u.pods.iter())
            .map(|p| (p.pod.as_str(), p.version.as_deref(), p.memory_bytes_max))
            .collect();
        assert_eq!(
            rows,
            [
                ("n0:8222", Some("2.15.2"), 300),
                ("n1:8222", Some("2.15.2"), 300)
            ]
        );
        assert_eq!(u.read_errors.len(), 1);
        assert_eq!(
            (u.read_errors[0].pod.as_str(), u.read_errors[0].failures),
            ("n2:8222", 2)
        );
        assert_eq!(u.read_errors[0].error, "connection refused");

        let mut st = BenchmarkRunStatus::default();
        apply(&mut st, &read(vec![], refused(), 0), false, false);
        // Servers that do not answer are asked on the schedule, not at every pass.
        assert!(!sample_due(&st, SAMPLE_EVERY_MS - 1));
        assert!(sample_due(&st, SAMPLE_EVERY_MS));
        apply(&mut st, &read(vec![], refused(), 5_000), true, false);
        let u = st.server_usage.unwrap();
        assert!(u.pods.is_empty(), "no row of zeros: {:?}", u.pods);
        assert_eq!(
            u.unavailable.as_deref(),
            Some("no server answered /varz yet: n2:8222: connection refused")
        );
        let json = serde_json::to_value(&u).unwrap();
        assert!(json.get("cpuCoresMean").is_none(), "{json}");
    }

    #[test]
    fn pods_are_bounded() {
        let mut u = ServerUsage::default();
        let many: Vec<(String, Sample)> = (0..40)
            .map(|i| (format!("p{i}"), nats(0.1, 1, 0)))
            .collect();
        record(&mut u, &many, 1_000);
        assert_eq!(u.pods.len(), MAX_SERVER_PODS);
    }
}
