//! The benchmark stream's leader as the JetStream servers report it (`/jsz`): read when a fault's
//! pod is chosen (a `streamLeader` fault hits it) and once the fault is over.
use crate::access::pod_http::{self, Options};
use k8s_openapi::api::core::v1::Pod;
use msgbench_crds::benchmark_run::{BenchmarkRun, FaultRecord};
use msgbench_operator_core::run::runners::build;
use msgbench_operator_core::server::jetstream::nats_conf;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

/// Each server's JetStream view with stream details but neither stream configs nor consumers
/// (the defaults, said so that a server default cannot widen it): about 1.6 kB plus 1 kB per
/// R3 stream (fixtures/nats-jsz-*.json, from nats-server 2.15). A run's stream is deleted
/// after its trial, so 16 KiB holds the run's and a dozen others on a shared server; an
/// answer over it is refused, never read.
const JSZ_PATH: &str = "/jsz?streams=true&config=false&consumers=false";
const JSZ: Options<'static> = Options::new(Duration::from_secs(2), 16 << 10);
const MONITOR_PORT: u16 = nats_conf::MONITOR_PORT as u16;

#[derive(serde::Deserialize)]
struct Jsz {
    #[serde(default)]
    account_details: Vec<AccountDetail>,
}
#[derive(serde::Deserialize)]
struct AccountDetail {
    #[serde(default)]
    stream_detail: Vec<StreamDetail>,
}
#[derive(serde::Deserialize)]
struct StreamDetail {
    name: String,
    cluster: Option<StreamCluster>,
}
#[derive(serde::Deserialize)]
struct StreamCluster {
    leader: Option<String>,
}

/// The benchmark stream's leader as the servers report it (each server lists the streams it
/// holds a replica of; any of them names the leader).
pub async fn stream_leader(
    br: &BenchmarkRun,
    rec: &FaultRecord,
    pods: &[Pod],
) -> Result<String, String> {
    current_leader(br, rec.trial, pods).await.ok_or_else(|| {
        format!(
            "no leader of stream {:?} that most servers agree on",
            stream_name(br, rec.trial)
        )
    })
}

/// The leader most of the servers holding `stream` name (a tie: none). A server cut off from
/// its peers may go on claiming a leadership the others have moved: the majority is the
/// cluster's view.
fn leader_of<'a>(stream: &str, answers: impl Iterator<Item = &'a Jsz>) -> Option<String> {
    let mut votes: std::collections::BTreeMap<&str, usize> = Default::default();
    let claims = answers
        .flat_map(|j| j.account_details.iter())
        .flat_map(|a| a.stream_detail.iter())
        .filter(|s| s.name == stream)
        .filter_map(|s| s.cluster.as_ref()?.leader.as_deref());
    for leader in claims {
        *votes.entry(leader).or_default() += 1;
    }
    let most = votes.values().copied().max()?;
    let mut top = votes.into_iter().filter(|&(_, n)| n == most);
    match (top.next(), top.next()) {
        (Some((leader, _)), None) => Some(leader.to_string()),
        _ => None,
    }
}

/// The leader of trial `trial`'s stream now, as most servers of `pods` name it.
pub async fn current_leader(br: &BenchmarkRun, trial: i32, pods: &[Pod]) -> Option<String> {
    let stream = stream_name(br, trial);
    let asks = pods.iter().filter_map(|p| {
        let ip: IpAddr = p.status.as_ref()?.pod_ip.as_ref()?.parse().ok()?;
        Some(async move {
            let r = pod_http::get(SocketAddr::new(ip, MONITOR_PORT), JSZ_PATH, JSZ).await;
            r.and_then(|r| r.json::<Jsz>()).ok()
        })
    });
    let answers = futures::future::join_all(asks).await;
    leader_of(&stream, answers.iter().flatten())
}

/// The stream trial `trial` uses: the runners name it after the run (see `run_isolation`).
/// Variants override replicas and storage, never the stream's name.
fn stream_name(br: &BenchmarkRun, trial: i32) -> String {
    let mut w = br.spec.workload.clone();
    let generation = br.metadata.generation.unwrap_or(0);
    let uid = br.metadata.uid.as_deref().unwrap_or_default();
    build::run_isolation(uid, generation).apply(&mut w, trial.max(0) as u32);
    w.jetstream.unwrap_or_default().stream
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Real answers of a 3-server cluster (nats-server 2.15) to [`JSZ_PATH`], from the leader of
    /// every stream there: with the run's stream alone, and with four others beside it.
    const JSZ_ONE: &str = include_str!("../fixtures/nats-jsz-one-stream.json");
    const JSZ_FIVE: &str = include_str!("../fixtures/nats-jsz-five-streams.json");

    /// A real `/jsz` fits the 16 KiB cap with room to spare and names the leader; an answer
    /// over the cap is refused, never read.
    #[tokio::test]
    async fn a_real_jsz_answer_fits_the_cap_and_names_the_leader() {
        assert!(JSZ_ONE.len() < 4 << 10 && JSZ_FIVE.len() < 8 << 10);
        for answer in [JSZ_ONE, JSZ_FIVE] {
            let jsz: Jsz = serde_json::from_str(answer).unwrap();
            let leader = leader_of("msgbench-a1b2c3d4g1-t1", std::iter::once(&jsz));
            assert_eq!(leader.as_deref(), Some("js-1"));
        }
        let padded = format!("{}{}", JSZ_FIVE, " ".repeat(10 << 10));
        let app = axum::Router::new()
            .route("/jsz", axum::routing::get(|| async { JSZ_FIVE }))
            .route(
                "/big/jsz",
                axum::routing::get(move || async move { padded }),
            );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        let read = pod_http::get(addr, JSZ_PATH, JSZ).await.unwrap();
        assert!(read.json::<Jsz>().is_ok());
        let big = pod_http::get(addr, "/big/jsz", JSZ).await.unwrap_err();
        assert!(
            big.to_string().ends_with("response body over 16384 bytes"),
            "{big}"
        );
    }

    #[test]
    fn the_leader_is_read_from_any_server_holding_the_stream() {
        let answers: Vec<Jsz> = [
            r#"{"account_details":[{"stream_detail":[{"name":"OTHER","cluster":{"leader":"js-0"}}]}]}"#,
            r#"{"account_details":[{"stream_detail":[{"name":"BENCH","cluster":{"leader":"js-2"}}]}]}"#,
            r#"{}"#,
        ]
        .iter()
        .map(|t| serde_json::from_str(t).unwrap())
        .collect();
        assert_eq!(leader_of("BENCH", answers.iter()), Some("js-2".into()));
        assert_eq!(leader_of("NONE", answers.iter()), None);
        // A cut-off server still claiming it leads is outvoted; a tie names nobody.
        let split: Vec<Jsz> = ["js-0", "js-1", "js-1"]
            .iter()
            .map(|l| {
                let t = format!(
                    r#"{{"account_details":[{{"stream_detail":[{{"name":"BENCH","cluster":{{"leader":"{l}"}}}}]}}]}}"#
                );
                serde_json::from_str(&t).unwrap()
            })
            .collect();
        assert_eq!(leader_of("BENCH", split.iter()), Some("js-1".into()));
        assert_eq!(leader_of("BENCH", split[..2].iter()), None);
    }
}
