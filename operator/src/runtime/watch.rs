//! What every controller's wiring shares: an `Api` for one namespace or all, and a wait for a
//! reflector store's first full list.
use k8s_openapi::NamespaceResourceScope;
use kube::runtime::reflector::Store;
use kube::{Api, Client, Resource};
use std::time::Duration;

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
