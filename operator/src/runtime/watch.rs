//! What every controller's wiring shares: an `Api` for one namespace or all, a wait for a
//! reflector store's first full list, and running a controller until leadership is lost.
use k8s_openapi::NamespaceResourceScope;
use kube::runtime::reflector::Store;
use kube::{Api, Client, Resource};
use std::future::Future;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// `T`s in `namespace`, or in every namespace.
pub fn api<T>(client: &Client, namespace: Option<&str>) -> Api<T>
where
    T: Resource<DynamicType = (), Scope = NamespaceResourceScope>,
{
    match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

/// Waits until `store` holds its first full list; false if its writer is gone. kube-runtime's
/// `Store::wait_until_ready` wakes only the waiter that polled it last (its `DelayedInit` keeps
/// one waker) and the controller's applier waits on it too, so a single long wait can miss the
/// wake-up: re-poll on a short timer, and let one task per store wait.
pub async fn store_ready<K>(store: &Store<K>) -> bool
where
    K: kube::Resource + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    loop {
        match tokio::time::timeout(Duration::from_millis(500), store.wait_until_ready()).await {
            Ok(result) => return result.is_ok(),
            Err(_) => continue,
        }
    }
}

/// Runs a controller (`work`) with its helper (`beside`: cache-sync marker, sweeps) until the
/// controller ends (graceful shutdown on SIGTERM) or `stop` is cancelled (leadership lost).
/// Both are dropped on return, reconciles in flight with them, so nothing of the term goes on
/// acting, and nothing is awaited first. Returns false when stopped by `stop`.
pub async fn run_until_stopped(
    stop: &CancellationToken,
    work: impl Future<Output = ()>,
    beside: impl Future<Output = ()>,
) -> bool {
    // A helper that is done (a store that never syncs) must not end the controller.
    let beside = async {
        beside.await;
        std::future::pending::<()>().await
    };
    tokio::select! {
        () = work => true,
        () = beside => unreachable!("pending"),
        () = stop.cancelled() => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    /// Set when dropped: stands for a reconcile in flight.
    struct InFlight(Arc<AtomicBool>);
    impl Drop for InFlight {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    #[tokio::test]
    async fn a_stopped_controller_drops_its_work_and_helper_at_once() {
        let stop = CancellationToken::new();
        let (work_dropped, helper_dropped) = (Arc::default(), Arc::default());
        let work = {
            let guard = InFlight(Arc::clone(&work_dropped));
            async move {
                let _guard = guard;
                std::future::pending::<()>().await
            }
        };
        let beside = {
            let guard = InFlight(Arc::clone(&helper_dropped));
            async move {
                let _guard = guard;
                std::future::pending::<()>().await
            }
        };
        stop.cancel();
        assert!(!run_until_stopped(&stop, work, beside).await);
        assert!(work_dropped.load(Ordering::SeqCst));
        assert!(helper_dropped.load(Ordering::SeqCst));
    }

    #[tokio::test]
    async fn a_finished_helper_does_not_end_the_controller() {
        let stop = CancellationToken::new();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let work = async move {
            let _ = rx.await;
        };
        let beside = async move {
            let _ = tx.send(());
        };
        assert!(
            run_until_stopped(&stop, work, beside).await,
            "ended by itself"
        );
    }
}
