//! Reads the target Service and its EndpointSlices for `endpoint_readiness` to judge (the
//! judging is pure and lives in the core; this is the client half).
use crate::runtime::context::Context;
use crate::runtime::error::Result;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, ListParams};
use msgbench_operator_core::run::target::endpoint_readiness::{
    evaluate, service_of_host, service_port,
};
use runner_api::target::TargetUrl;

/// Why the run must keep waiting (`Some`), or `None` when the URL's Service has a ready
/// endpoint or is not a Service this operator can see. `server_ref`: the Service belongs to a
/// msgbench server, so its absence is a reason to wait too.
pub async fn not_programmed(
    ctx: &Context,
    url: &str,
    run_ns: &str,
    server_ref: bool,
) -> Result<Option<String>> {
    let Ok(t) = TargetUrl::parse(url) else {
        return Ok(None);
    };
    let Some((ns, name)) = service_of_host(&t.host, run_ns) else {
        return Ok(None);
    };
    if ns != run_ns {
        tracing::debug!(%url, namespace = %ns, run_namespace = %run_ns,
            "target Service is in another namespace: its endpoints are not inspected");
        return Ok(None);
    }
    let shown = format!("Service {ns}/{name} port {}", t.port);
    let services: Api<Service> = Api::namespaced(ctx.client.clone(), &ns);
    let by_name = ListParams::default().fields(&format!("metadata.name={name}"));
    let Some(list) = forbidden_is_none(services.list(&by_name).await)? else {
        return Ok(None);
    };
    let Some(svc) = list.items.first() else {
        return Ok(server_ref.then(|| format!("{shown}: the Service does not exist yet")));
    };
    let want = match service_port(svc, t.port) {
        Ok(Some(w)) => w,
        Ok(None) => return Ok(None),
        Err(why) => return Ok(Some(format!("{shown}: the Service {why}"))),
    };
    let slices: Api<EndpointSlice> = Api::namespaced(ctx.client.clone(), &ns);
    let by_service = ListParams::default().labels(&format!("kubernetes.io/service-name={name}"));
    let Some(list) = forbidden_is_none(slices.list(&by_service).await)? else {
        return Ok(None);
    };
    Ok(evaluate(&list.items, &want)
        .err()
        .map(|why| format!("{shown}: {why}")))
}

/// A namespace the operator may not read (it watches only its own) is not checked.
fn forbidden_is_none<T>(r: kube::Result<T>) -> Result<Option<T>> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(kube::Error::Api(s)) if s.code == 403 => Ok(None),
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::context::Readiness;
    use std::sync::{Arc, Mutex};

    /// A Context whose API answers every Service list with one Service on port 9999 only, and
    /// records the paths it was asked for.
    fn context_listing_services() -> (Context, Arc<Mutex<Vec<String>>>) {
        let asked = Arc::new(Mutex::new(Vec::new()));
        let seen = asked.clone();
        let svc = tower::service_fn(move |req: http::Request<kube::client::Body>| {
            seen.lock().unwrap().push(req.uri().path().to_string());
            let list = serde_json::json!({
                "apiVersion": "v1", "kind": "ServiceList", "metadata": {},
                "items": [{"metadata": {"name": "pss"}, "spec": {"ports": [{"port": 9999}]}}],
            });
            let body = kube::client::Body::from(serde_json::to_vec(&list).unwrap());
            async move { Ok::<_, std::convert::Infallible>(http::Response::new(body)) }
        });
        let client = kube::Client::new(svc, "default");
        let ctx = Context::new(client, Arc::new(Readiness::new(1)), false);
        (ctx, asked)
    }

    #[tokio::test]
    async fn services_of_another_namespace_are_not_inspected() {
        let (ctx, asked) = context_listing_services();
        let foreign = not_programmed(&ctx, "ws://pss.other.svc:8080/ws", "run-ns", true).await;
        assert_eq!(foreign.unwrap(), None);
        assert!(asked.lock().unwrap().is_empty(), "{:?}", asked.lock());
        // The run's own namespace is still checked (and the fake's answer is seen).
        let own = not_programmed(&ctx, "ws://pss.run-ns.svc:8080/ws", "run-ns", true).await;
        let why = own.unwrap().expect("port 8080 is not exposed");
        assert!(why.starts_with("Service run-ns/pss port 8080:"), "{why}");
        assert_eq!(
            *asked.lock().unwrap(),
            ["/api/v1/namespaces/run-ns/services"]
        );
    }
}
