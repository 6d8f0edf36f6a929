//! Gathering every runner's records once all runners are done: from the agent's control
//! endpoint while it holds them, else (only with `--results-from-pod-logs`, which needs `get`
//! on pods/log) from the checksummed frames in its pod log. A record
//! that cannot be read intact fails the run as `ResultsLost`, naming the runner and the trial.
use crate::access::control_key::RequestSigner;
use crate::access::pod_http;
use crate::benchmark_run::runners::runner_http;
use crate::runtime::merge_budget::{BudgetError, MergeBudget, Reservation};
use futures::{AsyncBufReadExt, StreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::api::LogParams;
use kube::{Api, ResourceExt};
use msgbench_operator_core::run::model::Gathered;
use msgbench_operator_core::run::runners::runner_records::{complete_records, runner_id};
use runner_api::agent::RawResultLine;
use runner_api::result_frames::{self, Reassembled};
use std::collections::BTreeMap;
use std::net::SocketAddr;

/// A runner that finished every trial: still holding its results (its agent's address, see
/// `runner_http::agent_addr`) or exited.
pub struct DoneRunner<'a> {
    pub pod: &'a Pod,
    pub holding_at: Option<SocketAddr>,
}

/// Bytes of record JSON one run may bring into the operator, over all its runners: the
/// records are held until every runner is in (the admission bound on runners x trials x
/// phases keeps real runs far below it), and a runner image is user-chosen, so a hostile or
/// broken one must not be able to take the operator past its memory limit. All runs together
/// share one budget besides ([`MergeBudget`], which caps this share to the whole).
pub const RESULTS_BUDGET_BYTES: usize = 32 << 20;

/// Why an agent's records could not be had.
enum AgentRead {
    NotYet(String),
    TooLarge(String),
}

/// Sorts a failed `/results` read: more than the run's share is final; anything else (a busy
/// budget, an agent that did not answer) is worth asking again.
fn classify(e: pod_http::Error, share: usize) -> AgentRead {
    match &e.kind {
        pod_http::ErrorKind::TooLarge(_)
        | pod_http::ErrorKind::Budget(BudgetError::OverShare { .. }) => {
            AgentRead::TooLarge(format!(
                "{e} (the results of a run may take {share} bytes of the operator's memory in all)"
            ))
        }
        _ => AgentRead::NotYet(e.to_string()),
    }
}

async fn from_agent(
    addr: SocketAddr,
    access: &ResultsAccess<'_>,
    held: &mut Reservation,
) -> Result<(u16, BTreeMap<u32, RawResultLine>), AgentRead> {
    let share = held.cap();
    let max = share.saturating_sub(held.bytes());
    let r = runner_http::results(addr, access.control, max, held)
        .await
        .map_err(|e| classify(e, share))?;
    if !r.finished && !access.so_far {
        return Err(AgentRead::NotYet(format!(
            "agent on {addr} has not finished"
        )));
    }
    let records = r.records.into_iter().map(|l| (l.trial, l)).collect();
    Ok((r.runner_id, records))
}

/// The runner's records from its log, read line by line (only its frames are kept, at most
/// `budget` bytes of them).
async fn from_log(
    pods: &Api<Pod>,
    pod: &Pod,
    runner: u16,
    budget: usize,
) -> kube::Result<result_frames::Reassembled> {
    let params = LogParams {
        container: Some("runner".into()),
        ..LogParams::default()
    };
    let mut lines = pods.log_stream(&pod.name_any(), &params).await?.lines();
    let mut r = result_frames::Reassembler::new(runner, budget);
    while let Some(line) = lines.next().await {
        match line {
            Ok(l) => r.push(&l),
            // A line that is not UTF-8 is not a frame; the stream itself failing is.
            Err(e) if e.kind() == std::io::ErrorKind::InvalidData => continue,
            Err(e) => return Err(kube::Error::ReadEvents(e)),
        }
    }
    Ok(r.finish())
}

/// One runner's records: from its agent while it holds them, else from its log. Either way
/// they end up counted in `held`.
async fn records_of(
    pods: &Api<Pod>,
    d: &DoneRunner<'_>,
    runner: u16,
    access: &ResultsAccess<'_>,
    held: &mut Reservation,
) -> kube::Result<Result<Reassembled, Gathered>> {
    let name = d.pod.name_any();
    let Some(addr) = d.holding_at else {
        if !access.from_logs {
            return Ok(Err(Gathered::Lost(not_held(&name, runner))));
        }
        // The log is read line by line and only frames kept, bounded by the run's share; the
        // kept bytes are counted once read.
        let share_left = held.cap().saturating_sub(held.bytes());
        let got = from_log(pods, d.pod, runner, share_left).await?;
        let bytes = got.records.values().map(|l| l.json_bytes()).sum::<usize>();
        return Ok(match held.hold(held.bytes() + bytes).await {
            Ok(()) => Ok(got),
            Err(e) => Err(Gathered::NotYet(format!("pod {name}: {e}"))),
        });
    };
    Ok(match from_agent(addr, access, held).await {
        Ok((id, records)) if id == runner => Ok(Reassembled {
            records,
            damaged: BTreeMap::new(),
        }),
        Ok((id, _)) => Err(Gathered::Lost(format!(
            "pod {name} is runner {runner} but its agent says {id}"
        ))),
        Err(AgentRead::TooLarge(e)) => Err(Gathered::TooLarge(format!("pod {name}: {e}"))),
        Err(AgentRead::NotYet(e)) => Err(Gathered::NotYet(format!("pod {name}: {e}"))),
    })
}

/// How the operator may read results: signing the run's control credentials, and whether pod
/// logs too.
pub struct ResultsAccess<'a> {
    pub control: RequestSigner<'a>,
    pub from_logs: bool,
    /// Read the records so far from agents that have not finished (a `spec.stopWhen` check
    /// between rounds): they must hold exactly the trials asked for.
    pub so_far: bool,
}

/// Why a runner that exited cannot give its results when pod logs are off.
fn not_held(pod: &str, runner: u16) -> String {
    format!(
        "runner {runner} (pod {pod}) exited before the operator read its results: raise \
         spec.runners.resultsHoldSeconds, or let the operator read pod logs (chart value \
         results.fromPodLogs)"
    )
}

/// Every runner's records, or why not (yet), and the memory they hold in the operator's
/// budget (keep it until the merge is written).
pub async fn gather(
    pods: &Api<Pod>,
    done: &[DoneRunner<'_>],
    access: &ResultsAccess<'_>,
    trials: u32,
    budget: &MergeBudget,
) -> kube::Result<(Gathered, Reservation)> {
    let mut held = budget.reservation();
    let mut all = Vec::new();
    for d in done {
        let name = d.pod.name_any();
        let Some(runner) = runner_id(d.pod) else {
            let why = format!(
                "runner pod {name} has no job-completion-index: cannot tell which runner it is"
            );
            return Ok((Gathered::Lost(why), held));
        };
        let got = match records_of(pods, d, runner, access, &mut held).await? {
            Ok(got) => got,
            Err(g) => return Ok((g, held)),
        };
        match complete_records(runner, &name, got.records, &got.damaged, trials) {
            Ok(lines) => all.extend(lines),
            Err(why) => return Ok((Gathered::Lost(why), held)),
        }
    }
    Ok((Gathered::Complete(all), held))
}

/// Tells every runner still holding its results that the operator stored them all.
pub async fn release_holding(agents: &[SocketAddr], control: RequestSigner<'_>, records: u32) {
    let acks = agents.iter().map(|&addr| async move {
        if let Err(e) = runner_http::ack(addr, control, records).await {
            tracing::debug!(runner = %addr, error = %e, "results ack not delivered (the runner exits after its hold)");
        }
    });
    futures::future::join_all(acks).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn test_key() -> runner_api::control_auth::ControlSigner {
        runner_api::control_auth::ControlSigner::from_seed([1; 32])
    }

    /// A record stand-in: the checks only look at trial numbers.
    fn line(trial: u32) -> u32 {
        trial
    }

    #[test]
    fn a_missing_or_damaged_trial_is_named() {
        let recs = BTreeMap::from([(1, line(1)), (3, line(3))]);
        let damaged = BTreeMap::from([(2, "frames 2 of 3 missing from the log".to_string())]);
        let err = complete_records(2, "run-g1-1-abc", recs, &damaged, 4).unwrap_err();
        assert!(err.starts_with("runner 2 (pod run-g1-1-abc): "), "{err}");
        assert!(err.contains("trial 2: frames 2 of 3 missing"), "{err}");
        assert!(err.contains("trial 4: no record"), "{err}");
    }

    /// A runner pod with completion index 0 (runner 1).
    fn runner_pod() -> Pod {
        let mut p = Pod::default();
        p.metadata.name = Some("run-g1-0-abc".into());
        let index = (
            "batch.kubernetes.io/job-completion-index".to_string(),
            "0".to_string(),
        );
        p.metadata.labels = Some(BTreeMap::from([index]));
        p
    }

    /// An API that answers nothing: a test that reaches it fails.
    fn no_api() -> Api<Pod> {
        let client = kube::Client::new(
            tower::service_fn(|_| async { Err::<http::Response<kube::client::Body>, _>("no API") }),
            "ns",
        );
        Api::namespaced(client, "ns")
    }

    /// Without pod-log access, a runner that let its results go is lost with the two ways out,
    /// and its log is never asked for.
    #[tokio::test]
    async fn an_exited_runner_without_log_access_names_the_remedies() {
        let pod = runner_pod();
        let done = [DoneRunner {
            pod: &pod,
            holding_at: None,
        }];
        let budget = MergeBudget::new(1 << 20, 32 << 10, std::time::Duration::from_secs(5));
        let key = test_key();
        let access = ResultsAccess {
            control: RequestSigner::new(&key, "run-uid"),
            from_logs: false,
            so_far: false,
        };
        let (got, _) = gather(&no_api(), &done, &access, 1, &budget).await.unwrap();
        let Gathered::Lost(why) = got else {
            panic!("not lost: {got:?}");
        };
        assert!(
            why.starts_with("runner 1 (pod run-g1-0-abc) exited"),
            "{why}"
        );
        assert!(why.contains("resultsHoldSeconds") && why.contains("results.fromPodLogs"));
        // With access, the log is asked for (and this API fails, as an error, not a loss).
        let access = ResultsAccess {
            from_logs: true,
            ..access
        };
        assert!(gather(&no_api(), &done, &access, 1, &budget).await.is_err());
    }

    /// An agent whose `/results` answer is `bytes` long, as a hostile image might send.
    async fn agent_answering(bytes: usize) -> SocketAddr {
        let app = axum::Router::new().route(
            "/results",
            axum::routing::get(move || async move { "x".repeat(bytes) }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        addr
    }

    #[tokio::test]
    async fn an_answer_over_the_runs_share_is_refused_with_a_reason() {
        let addr = agent_answering(64 << 10).await;
        // Never asked: the runner still holds its results.
        let pods = no_api();
        let pod = runner_pod();
        let done = [DoneRunner {
            pod: &pod,
            holding_at: Some(addr),
        }];
        let budget = MergeBudget::new(1 << 20, 32 << 10, std::time::Duration::from_secs(5));
        let key = test_key();
        let access = ResultsAccess {
            control: RequestSigner::new(&key, "run-uid"),
            from_logs: false,
            so_far: false,
        };
        let (got, held) = gather(&pods, &done, &access, 1, &budget).await.unwrap();
        let Gathered::TooLarge(why) = got else {
            panic!("not refused: {got:?}");
        };
        assert!(why.starts_with("pod run-g1-0-abc: GET http://"), "{why}");
        assert!(why.contains("response body over 32768 bytes"), "{why}");
        assert!(
            why.contains("may take 32768 bytes of the operator's memory"),
            "{why}"
        );
        assert_eq!(held.bytes(), 0, "a refused answer is never read");
    }

    #[test]
    fn all_trials_in_order_pass() {
        let recs = BTreeMap::from([(2, line(2)), (1, line(1))]);
        let got = complete_records(2, "p", recs, &BTreeMap::new(), 2).unwrap();
        assert_eq!(got, [1, 2]);
        let extra = BTreeMap::from([(1, line(1)), (5, line(5))]);
        assert!(complete_records(2, "p", extra, &BTreeMap::new(), 1)
            .unwrap_err()
            .contains("trial 5: not in the plan"));
    }
}
