//! "Is what we want already there?" — desired JSON contained in the live JSON.
//!
//! The API server adds defaults (protocol: TCP, terminationGracePeriodSeconds, ...), so live
//! objects are supersets of what we apply. A field we set that someone changed (kubectl edit,
//! kubectl scale) breaks containment and makes the operator re-apply.

use serde_json::Value;

pub fn is_contained(desired: &Value, live: &Value) -> bool {
    contained_at(None, desired, live)
}

/// Keys whose values are quantities: the API server returns them canonicalised (`1000m` as
/// `1`), so they compare by value.
const QUANTITY_KEYS: &[&str] = &["cpu", "memory", "ephemeral-storage", "storage", "sizeLimit"];

fn contained_at(key: Option<&str>, desired: &Value, live: &Value) -> bool {
    match (desired, live) {
        (Value::Object(d), Value::Object(l)) => d.iter().all(|(k, dv)| match l.get(k) {
            Some(lv) => contained_at(Some(k), dv, lv),
            // Nulls and empty maps/lists are dropped by the API server.
            None => is_empty(dv),
        }),
        (Value::Array(d), Value::Array(l)) => {
            d.len() == l.len() && d.iter().zip(l).all(|(dv, lv)| contained_at(key, dv, lv))
        }
        (d, Value::Null) => is_empty(d),
        (d, l) if d == l => true,
        (d, l) if key.is_some_and(|k| QUANTITY_KEYS.contains(&k)) => same_quantity(d, l),
        _ => false,
    }
}

fn same_quantity(d: &Value, l: &Value) -> bool {
    let text = |v: &Value| match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    };
    match (text(d), text(l)) {
        (Some(d), Some(l)) => msgbench_operator_core::quantity::same_value(&d, &l) == Some(true),
        _ => false,
    }
}

fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Object(o) => o.is_empty(),
        Value::Array(a) => a.is_empty(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_added_by_the_server_keep_containment() {
        let desired = json!({"spec": {"ports": [{"port": 4222}], "selector": {"a": "b"}}});
        let live = json!({"spec": {"ports": [{"port": 4222, "protocol": "TCP"}],
                                    "selector": {"a": "b"}, "type": "ClusterIP"}});
        assert!(is_contained(&desired, &live));
    }

    #[test]
    fn quantities_the_api_server_canonicalised_keep_containment() {
        let desired = json!({"resources": {"limits": {"cpu": "1000m", "memory": "0.5Gi"},
                                           "requests": {"cpu": 0.5}},
                             "volumes": [{"emptyDir": {"sizeLimit": "1e3"}}]});
        let live = json!({"resources": {"limits": {"cpu": "1", "memory": "512Mi"},
                                        "requests": {"cpu": "500m"}},
                          "volumes": [{"emptyDir": {"sizeLimit": "1k"}}]});
        assert!(is_contained(&desired, &live));
        let changed = json!({"resources": {"limits": {"cpu": "2", "memory": "512Mi"},
                                           "requests": {"cpu": "500m"}},
                             "volumes": [{"emptyDir": {"sizeLimit": "1k"}}]});
        assert!(!is_contained(&desired, &changed));
        // Only quantity fields compare by value: an env value "1000m" is not "1".
        let env = json!({"env": [{"name": "X", "value": "1000m"}]});
        assert!(!is_contained(
            &env,
            &json!({"env": [{"name": "X", "value": "1"}]})
        ));
    }

    #[test]
    fn a_changed_or_missing_field_breaks_containment() {
        let desired = json!({"spec": {"replicas": 3}});
        assert!(!is_contained(&desired, &json!({"spec": {"replicas": 1}})));
        assert!(!is_contained(&desired, &json!({"spec": {}})));
        let list = json!({"args": ["a", "b"]});
        assert!(!is_contained(&list, &json!({"args": ["a"]})));
    }
}
