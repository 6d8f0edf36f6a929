//! Admission bounds everywhere in user-written specs: every string has maxLength (or an enum),
//! every list maxItems, every map maxProperties, every number a minimum and maximum. This keeps
//! CEL cost estimates small and absurd values out of the API.
use msgbench_crdgen::generate::all_crds;
use serde_json::Value;

fn walk(schema: &Value, path: &str, problems: &mut Vec<String>) {
    let has = |k: &str| schema.get(k).is_some();
    if schema.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true)) {
        let bounded = schema["allOf"]
            .as_array()
            .is_some_and(|all| all.iter().any(|s| s.get("maxLength").is_some()));
        if !bounded {
            problems.push(format!("{path}: int-or-string without maxLength"));
        }
        return;
    }
    match schema.get("type").and_then(Value::as_str) {
        Some("string") if !has("maxLength") && !has("enum") => {
            problems.push(format!("{path}: string without maxLength"))
        }
        Some("integer" | "number") if !(has("minimum") && has("maximum")) => {
            problems.push(format!("{path}: number without minimum and maximum"))
        }
        Some("array") => {
            if !has("maxItems") {
                problems.push(format!("{path}: list without maxItems"));
            }
            walk(&schema["items"], &format!("{path}[]"), problems);
        }
        Some("object") => {
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                for (k, v) in props {
                    // Descriptions are the `kubectl explain` text.
                    if v.get("description")
                        .and_then(Value::as_str)
                        .is_none_or(str::is_empty)
                    {
                        problems.push(format!("{path}.{k}: no description"));
                    }
                    walk(v, &format!("{path}.{k}"), problems);
                }
            }
            if let Some(extra) = schema.get("additionalProperties").filter(|v| v.is_object()) {
                if !has("maxProperties") {
                    problems.push(format!("{path}: map without maxProperties"));
                }
                walk(extra, &format!("{path}.*"), problems);
            }
        }
        _ => {}
    }
}

#[test]
fn every_spec_field_is_bounded() {
    let mut problems = Vec::new();
    for crd in all_crds() {
        let crd = serde_json::to_value(&crd).expect("crd json");
        let kind = crd["spec"]["names"]["kind"]
            .as_str()
            .expect("kind")
            .to_string();
        let spec = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
        assert!(spec.is_object(), "{kind}: no spec schema");
        walk(spec, &format!("{kind}.spec"), &mut problems);
    }
    assert!(
        problems.is_empty(),
        "unbounded fields:\n{}",
        problems.join("\n")
    );
}

#[test]
fn every_kind_has_short_name_category_status_and_columns() {
    for crd in all_crds() {
        let v = &crd.spec.versions[0];
        let kind = &crd.spec.names.kind;
        assert_eq!(crd.spec.group, "msgbench.dev");
        assert_eq!(v.name, "v1alpha1");
        assert_eq!(crd.spec.scope, "Namespaced");
        assert_eq!(
            crd.spec.names.short_names.as_ref().map(Vec::len),
            Some(1),
            "{kind}"
        );
        assert_eq!(
            crd.spec.names.categories.as_deref(),
            Some(&["msgbench".to_string()][..])
        );
        assert!(
            v.subresources
                .as_ref()
                .and_then(|s| s.status.as_ref())
                .is_some(),
            "{kind}"
        );
        let cols: Vec<&str> = v
            .additional_printer_columns
            .iter()
            .flatten()
            .map(|c| c.name.as_str())
            .collect();
        let want: &[&str] = if kind == "BenchmarkRun" {
            &["Phase", "Target", "Msgs/s", "P99", "Reason", "Age"]
        } else {
            &["Ready", "Replicas", "Pinned", "URL", "Age"]
        };
        for w in want {
            assert!(
                cols.contains(w),
                "{kind}: printer column {w} missing in {cols:?}"
            );
        }
    }
}
