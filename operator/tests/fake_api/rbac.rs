//! The fake API server answers only what the chart's roles grant (`rbac::RULES`, with faults,
//! the pod-log path and retention on): a request the operator's ServiceAccount could not make is a 403 here
//! too, so the tests catch code that would only fail on a real cluster.
use msgbench_operator::access::rbac::{FAULT_RULES, LOG_RULES, RETENTION_RULES, RULES};

/// (API group, resource with subresource, verb) of a request.
pub fn attributes(method: &str, path: &str, query: &str) -> Option<(String, String, String)> {
    let segs: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let (group, rest) = match *segs.first()? {
        "api" => ("", &segs[2.min(segs.len())..]),
        "apis" => (*segs.get(1)?, &segs[3.min(segs.len())..]),
        _ => return None,
    };
    let rest = match rest {
        ["namespaces", _ns, tail @ ..] if !tail.is_empty() => tail,
        other => other,
    };
    let (resource, named) = match rest {
        [res] => (res.to_string(), false),
        [res, _name] => (res.to_string(), true),
        [res, _name, sub] => (format!("{res}/{sub}"), true),
        _ => return None,
    };
    let verb = match (method, named) {
        ("GET", true) => "get",
        ("GET", false) if query.contains("watch=true") || query.contains("watch=1") => "watch",
        ("GET", false) => "list",
        ("POST", _) => "create",
        ("PATCH", _) => "patch",
        ("PUT", _) => "update",
        ("DELETE", true) => "delete",
        ("DELETE", false) => "deletecollection",
        _ => return None,
    };
    Some((group.to_string(), resource, verb.to_string()))
}

/// Whether the operator's roles grant `method path`.
pub fn granted(method: &str, path: &str, query: &str) -> Result<(), String> {
    let Some((group, resource, verb)) = attributes(method, path, query) else {
        return Err(format!("{method} {path}: not a resource request"));
    };
    let rules = RULES
        .iter()
        .chain(FAULT_RULES)
        .chain(LOG_RULES)
        .chain(RETENTION_RULES)
        .map(|(g, r, v, _)| (g, r, v));
    let ok = rules.into_iter().any(|(g, rs, vs)| {
        *g == group && rs.contains(&resource.as_str()) && vs.contains(&verb.as_str())
    });
    match ok {
        true => Ok(()),
        false => Err(format!(
            "{verb} {group}/{resource} is not granted to the operator (operator/RBAC.md)"
        )),
    }
}

#[test]
fn requests_map_to_their_rbac_attributes() {
    let a = |m, p, q| attributes(m, p, q).unwrap();
    let t = |g: &str, r: &str, v: &str| (g.to_string(), r.to_string(), v.to_string());
    assert_eq!(
        a("GET", "/api/v1/namespaces/b/pods/p", ""),
        t("", "pods", "get")
    );
    assert_eq!(
        a("GET", "/api/v1/namespaces/b/pods", "labelSelector=x"),
        t("", "pods", "list")
    );
    assert_eq!(
        a("GET", "/api/v1/namespaces/b/pods/p/log", ""),
        t("", "pods/log", "get")
    );
    assert_eq!(
        a(
            "PATCH",
            "/apis/msgbench.dev/v1alpha1/namespaces/b/benchmarkruns/r/status",
            ""
        ),
        t("msgbench.dev", "benchmarkruns/status", "patch")
    );
    assert_eq!(
        a(
            "GET",
            "/apis/msgbench.dev/v1alpha1/benchmarkruns",
            "watch=true"
        ),
        t("msgbench.dev", "benchmarkruns", "watch")
    );
    assert!(granted("GET", "/api/v1/namespaces/b/pods/p", "").is_err());
    assert!(granted("GET", "/api/v1/namespaces/b/secrets/s", "").is_err());
    assert!(granted("GET", "/api/v1/namespaces/b/pods", "").is_ok());
}
