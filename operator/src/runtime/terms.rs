//! Terms of leadership in one process: the controllers run while this replica leads; when it
//! steps down they are stopped (within [`Timing::stop_within`](super::leader::Timing)) and it
//! campaigns again as a standby, so losing the Lease costs no container restart.
use super::leader::Elector;
use std::future::Future;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// How one term ended.
#[derive(Debug, PartialEq, Eq)]
enum TermEnd {
    /// The controllers ended by themselves (graceful shutdown on SIGTERM).
    ControllersEnded,
    /// This replica stepped down and its controllers have stopped.
    SteppedDown,
}

/// Leads whenever `elector` wins the Lease, running `controllers(stop)` for each term; `stop` is
/// cancelled when the term ends and the controllers must then return. Returns `Ok` when the
/// controllers end by themselves (SIGTERM while leading) or `shutdown` resolves while standby;
/// the caller then releases the Lease. An `Err` means the election cannot go on or the
/// controllers did not stop in time: the caller must exit the process, since they may still act.
pub async fn lead_terms<F, Fut>(
    elector: &mut Elector,
    mut controllers: F,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()>
where
    F: FnMut(CancellationToken) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            led = elector.until_leader() => {
                led.map_err(|why| anyhow::anyhow!("leader election: {why}"))?
            }
            () = &mut shutdown => {
                tracing::info!("stopped while standby");
                return Ok(());
            }
        }
        let stop = CancellationToken::new();
        let task = tokio::spawn(controllers(stop.clone()));
        match one_term(elector, task, stop).await? {
            TermEnd::ControllersEnded => return Ok(()),
            TermEnd::SteppedDown => elector.campaign_again().await?,
        }
    }
}

/// Waits for the controllers to end or this replica to step down; then stops them.
async fn one_term(
    elector: &mut Elector,
    mut task: JoinHandle<()>,
    stop: CancellationToken,
) -> anyhow::Result<TermEnd> {
    let why = tokio::select! {
        ended = &mut task => {
            ended.map_err(|e| anyhow::anyhow!("controllers: {e}"))?;
            return Ok(TermEnd::ControllersEnded);
        }
        why = elector.until_lost() => why,
    };
    tracing::error!(reason = %why, "leadership lost: stopping the controllers");
    let bound = elector.timing().stop_within;
    stop_controllers(task, stop, bound).await?;
    Ok(TermEnd::SteppedDown)
}

/// Cancels `stop` and waits up to `bound` for the controllers' task to end. Past it the task is
/// aborted, but a reconcile that holds its thread cannot be interrupted: an error then.
async fn stop_controllers(
    mut task: JoinHandle<()>,
    stop: CancellationToken,
    bound: std::time::Duration,
) -> anyhow::Result<()> {
    let started = Instant::now();
    stop.cancel();
    match tokio::time::timeout(bound, &mut task).await {
        Ok(Ok(())) => {
            tracing::info!(took = ?started.elapsed(), "controllers stopped after stepping down");
            Ok(())
        }
        Ok(Err(e)) if e.is_panic() => anyhow::bail!("controllers panicked while stopping: {e}"),
        Ok(Err(_)) => Ok(()),
        Err(_) => {
            task.abort();
            anyhow::bail!("controllers still running {bound:?} after stepping down")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn controllers_that_return_on_stop_are_stopped_within_the_bound() {
        let stop = CancellationToken::new();
        let token = stop.clone();
        let task = tokio::spawn(async move { token.cancelled().await });
        let bound = Duration::from_millis(200);
        stop_controllers(task, stop.clone(), bound).await.unwrap();
        assert!(stop.is_cancelled());
    }

    #[tokio::test(start_paused = true)]
    async fn controllers_that_ignore_stop_are_an_error_after_the_bound() {
        let task = tokio::spawn(std::future::pending::<()>());
        let abort = task.abort_handle();
        let t0 = Instant::now();
        let bound = Duration::from_millis(200);
        let err = stop_controllers(task, CancellationToken::new(), bound)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("still running"), "{err}");
        assert_eq!(
            t0.elapsed(),
            bound,
            "waited exactly the bound (paused clock)"
        );
        for _ in 0..100 {
            if abort.is_finished() {
                break;
            }
            tokio::task::yield_now().await;
        }
        assert!(abort.is_finished(), "the task is aborted as well");
    }
}
