//! "Is what we want already there?" — desired JSON contained in the live JSON.
//!
//! The API server adds defaults (protocol: TCP, terminationGracePeriodSeconds, ...), so live
//! objects are supersets of what we apply. A field we set that someone changed (kubectl edit,
//! kubectl scale) breaks containment and makes the operator re-apply.

use serde_json::Value;

pub fn is_contained(desired: &Value, live: &Value) -> bool {
    match (desired, live) {
        (Value::Object(d), Value::Object(l)) => d.iter().all(|(k, dv)| match l.get(k) {
            Some(lv) => is_contained(dv, lv),
            // Nulls and empty maps/lists are dropped by the API server.
            None => is_empty(dv),
        }),
        (Value::Array(d), Value::Array(l)) => {
            d.len() == l.len() && d.iter().zip(l).all(|(dv, lv)| is_contained(dv, lv))
        }
        (d, Value::Null) => is_empty(d),
        (d, l) => d == l,
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
    fn a_changed_or_missing_field_breaks_containment() {
        let desired = json!({"spec": {"replicas": 3}});
        assert!(!is_contained(&desired, &json!({"spec": {"replicas": 1}})));
        assert!(!is_contained(&desired, &json!({"spec": {}})));
        let list = json!({"args": ["a", "b"]});
        assert!(!is_contained(&list, &json!({"args": ["a"]})));
    }
}
