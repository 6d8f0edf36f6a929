//! Carries out one due fault: finds the target server's own pods (a pod counts only when its
//! StatefulSet is owned by that very server object), chooses one (`faults::choose_pod`; the
//! stream leader from the servers' `/jsz`), and, once `act` has recorded that choice in status,
//! deletes it with a uid precondition, so no other pod can ever be hit. The outcome goes into
//! the fault's record and an Event.
use crate::access::pod_http::{self, Options};
use crate::runtime::context::Context;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{DeleteParams, ListParams, Preconditions};
use kube::{Api, Resource, ResourceExt};
use msgbench_crds::benchmark_run::{
    BenchmarkRun, FaultAction, FaultInjection, FaultPod, FaultRecord, ServerKind, ServerRef,
};
use msgbench_crds::{JetStreamCluster, MqttBroker};
use msgbench_operator_core::run::faults::{self, choose_pod, FaultPodSeen};
use msgbench_operator_core::run::{build, fault_restart, server_restarts, variants};
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

/// The pod chosen for a due fault, not yet touched: `act` records it in status first.
pub async fn choose(
    ctx: &Context,
    br: &BenchmarkRun,
    ns: &str,
    rec: &FaultRecord,
    now: &Time,
) -> Result<FaultInjection, String> {
    let fault = br
        .spec
        .faults
        .get(rec.fault as usize)
        .ok_or("the fault is no longer in spec.faults")?;
    let server = faults::server_of(br, rec.variant.as_deref())
        .ok_or("the trial's target is not a serverRef")?;
    let owned = owned_pods(ctx, server, ns).await?;
    let names: Vec<String> = owned.iter().map(|p| p.name_any()).collect();
    let by_ordinal = faults::ordinals(&server.name, &names);
    // Read for every JetStream fault (the record says whom it hit); it chooses only for
    // `streamLeader`.
    let leader = match server.kind {
        ServerKind::JetStreamCluster => Some(stream_leader(br, rec, &owned).await),
        _ => None,
    };
    let before = leader.clone().and_then(Result::ok);
    let leader = leader.filter(|_| fault.pod == FaultPod::StreamLeader);
    let seed = variants::seed(
        &br.uid().unwrap_or_default(),
        br.meta().generation.unwrap_or(0),
    );
    let round = rec.round.unwrap_or(rec.trial).max(1) as u32;
    let (name, how) = choose_pod(fault, &by_ordinal, round, seed, leader)?;
    let pod = owned
        .iter()
        .find(|p| p.name_any() == name)
        .ok_or("the chosen pod is gone")?;
    Ok(FaultInjection {
        pod: name,
        pod_uid: pod.uid().ok_or("the chosen pod has no uid")?,
        started_time: now.clone(),
        how,
        stream_leader: before,
    })
}

/// What a delete request came to.
pub enum Deletion {
    Done,
    /// The API server refused it (gone, replaced, forbidden): the pod was not deleted.
    Refused(String),
    /// No answer we can trust (a timeout, a server error): the next pass looks at the pod.
    Unknown(String),
}

/// Deletes the recorded pod, only while it still has the recorded uid.
pub async fn delete(
    ctx: &Context,
    ns: &str,
    inj: &FaultInjection,
    action: Option<FaultAction>,
) -> Deletion {
    let dp = DeleteParams {
        grace_period_seconds: faults::deletion_grace_seconds(action),
        preconditions: Some(Preconditions {
            uid: Some(inj.pod_uid.clone()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    let res = Api::<Pod>::namespaced(ctx.client.clone(), ns)
        .delete(&inj.pod, &dp)
        .await;
    match res {
        Ok(_) => Deletion::Done,
        Err(kube::Error::Api(e)) if matches!(e.code, 403 | 404 | 409 | 422) => {
            Deletion::Refused(format!("deleting pod {}: {e}", inj.pod))
        }
        Err(e) => Deletion::Unknown(format!("deleting pod {}: {e}", inj.pod)),
    }
}

/// The pods that recorded injections name and that have no outcome yet, as they are now; for a
/// fault by agent, the agent is asked again as a repeat (the same key: it reports, never acts
/// twice; one that restarted since says it has no report).
pub async fn injected_pods(
    ctx: &Context,
    br: &BenchmarkRun,
    ns: &str,
    recs: &[FaultRecord],
) -> kube::Result<Vec<FaultPodSeen>> {
    let api = Api::<Pod>::namespaced(ctx.client.clone(), ns);
    let mut out = Vec::new();
    for rec in recs {
        let Some(inj) = faults::unsettled_injection(rec) else {
            continue;
        };
        let pod = pod_named(&api, &inj.pod).await?;
        let answer = match rec.action {
            Some(a) if a.needs_agent() => {
                Some(super::fault_by_agent::ask(ctx, br, ns, rec, inj, true).await)
            }
            _ => None,
        };
        out.push(FaultPodSeen {
            pod: inj.pod.clone(),
            uid: pod.as_ref().and_then(|p| p.uid()),
            deleting: pod.is_some_and(|p| p.metadata.deletion_timestamp.is_some()),
            answer,
        });
    }
    Ok(out)
}

/// The stream leader after each fault whose time has come (`faults::leader_after_due`); a fault
/// whose stream no majority names yet is asked again next pass.
pub async fn leaders_after(
    ctx: &Context,
    br: &BenchmarkRun,
    ns: &str,
    recs: &[FaultRecord],
    now: &Time,
) -> Vec<faults::FaultLeaderSeen> {
    let mut out = Vec::new();
    for rec in faults::leader_after_due(br, recs, now) {
        let Some(server) = faults::server_of(br, rec.variant.as_deref()) else {
            continue;
        };
        let Ok(pods) = owned_pods(ctx, server, ns).await else {
            continue;
        };
        if let Some(leader) = current_leader(br, rec.trial, &pods).await {
            out.push(faults::FaultLeaderSeen {
                fault: rec.fault,
                trial: rec.trial,
                leader,
            });
        }
    }
    out
}

/// The server container's status after each crash whose restart is still to be read
/// (`fault_restart::restart_due`); a pod that cannot be read now is read next pass.
pub async fn restarts_after(
    ctx: &Context,
    ns: &str,
    recs: &[FaultRecord],
    now: &Time,
) -> Vec<fault_restart::FaultRestartSeen> {
    let api = Api::<Pod>::namespaced(ctx.client.clone(), ns);
    let mut out = Vec::new();
    for rec in fault_restart::restart_due(recs, now) {
        let Some(name) = rec.pod.as_deref() else {
            continue;
        };
        let Ok(Some(pod)) = pod_named(&api, name).await else {
            continue;
        };
        if let Some(status) = server_restarts::server_container(&pod) {
            out.push(fault_restart::FaultRestartSeen {
                fault: rec.fault,
                trial: rec.trial,
                status: status.clone(),
            });
        }
    }
    out
}

/// The pod called `name`, if any, by a list (the operator may list pods, never `get` one).
pub(super) async fn pod_named(api: &Api<Pod>, name: &str) -> kube::Result<Option<Pod>> {
    let lp = ListParams::default().fields(&format!("metadata.name={name}"));
    Ok(api.list(&lp).await?.items.into_iter().next())
}

/// Uids of what directly controls the server's pods: its StatefulSets, and the ReplicaSets of
/// its Deployments (a single-broker MqttBroker is a Deployment), each checked by controller uid.
async fn controlled_by(ctx: &Context, ns: &str, server: &[String]) -> Result<Vec<String>, String> {
    let lp = ListParams::default();
    let mine = |refs: &[OwnerReference], of: &[String]| {
        controller_uid(refs).is_some_and(|u| of.iter().any(|o| o == u))
    };
    let c = ctx.client.clone();
    let sets = Api::<StatefulSet>::namespaced(c.clone(), ns)
        .list(&lp)
        .await;
    let deps = Api::<Deployment>::namespaced(c.clone(), ns).list(&lp).await;
    let (sets, deps) = (
        sets.map_err(|e| format!("listing StatefulSets: {e}"))?,
        deps.map_err(|e| format!("listing Deployments: {e}"))?,
    );
    let mut out: Vec<String> = (sets.items.iter())
        .filter(|s| mine(s.owner_references(), server))
        .filter_map(|s| s.uid())
        .collect();
    let owned_deps: Vec<String> = (deps.items.iter())
        .filter(|d| mine(d.owner_references(), server))
        .filter_map(|d| d.uid())
        .collect();
    if !owned_deps.is_empty() {
        let rs = Api::<ReplicaSet>::namespaced(c, ns).list(&lp).await;
        let rs = rs.map_err(|e| format!("listing ReplicaSets: {e}"))?;
        out.extend(
            (rs.items.iter())
                .filter(|r| mine(r.owner_references(), &owned_deps))
                .filter_map(|r| r.uid()),
        );
    }
    Ok(out)
}

/// Running pods of `server` whose controlling StatefulSet (or Deployment's ReplicaSet) is
/// controlled by `server` itself.
async fn owned_pods(ctx: &Context, server: &ServerRef, ns: &str) -> Result<Vec<Pod>, String> {
    let uid = server_uid(ctx, server, ns).await?;
    let sel = build::server_selector(server.kind, &server.name)
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",");
    let lp = ListParams::default().labels(&sel);
    let owned_sets = controlled_by(ctx, ns, std::slice::from_ref(&uid)).await?;
    let pods = Api::<Pod>::namespaced(ctx.client.clone(), ns)
        .list(&lp)
        .await
        .map_err(|e| format!("listing the server's pods: {e}"))?;
    let owned: Vec<Pod> = pods
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| {
            controller_uid(p.owner_references()).is_some_and(|u| owned_sets.iter().any(|s| s == u))
        })
        .collect();
    if owned.is_empty() {
        return Err(format!(
            "{} has no running pod it owns",
            faults::server_display(server)
        ));
    }
    Ok(owned)
}

fn controller_uid(
    refs: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference],
) -> Option<&str> {
    refs.iter()
        .find(|r| r.controller == Some(true))
        .map(|r| r.uid.as_str())
}

pub(super) async fn server_uid(ctx: &Context, s: &ServerRef, ns: &str) -> Result<String, String> {
    let c = ctx.client.clone();
    let uid = match s.kind {
        ServerKind::JetStreamCluster => Api::<JetStreamCluster>::namespaced(c, ns)
            .get(&s.name)
            .await
            .map(|o| o.uid()),
        ServerKind::MqttBroker => Api::<MqttBroker>::namespaced(c, ns)
            .get(&s.name)
            .await
            .map(|o| o.uid()),
        ServerKind::PubSubServer => return Err("faults do not act on PubSubServer pods".into()),
    };
    uid.map_err(|e| format!("reading {}: {e}", faults::server_display(s)))?
        .ok_or_else(|| "the server has no uid".into())
}

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
async fn stream_leader(
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
    const JSZ_ONE: &str = include_str!("fixtures/nats-jsz-one-stream.json");
    const JSZ_FIVE: &str = include_str!("fixtures/nats-jsz-five-streams.json");

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
