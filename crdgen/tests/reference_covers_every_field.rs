//! The CRD reference pages (docs/src/reference/) list every field of the four CRDs, with every
//! CEL rule's message and every default: walked here from the schemas themselves, apart from
//! the generator, so a field the generator skipped fails this test.
use msgbench_crdgen::generate::{all_crds, repo_root};
use msgbench_crdgen::reference::{page_path, unescape};
use serde_json::Value;

/// What a page must show for one schema: (field path, its default, its rules' messages).
fn expected(schema: &Value, path: &str, out: &mut Vec<(String, Option<String>, Vec<String>)>) {
    let messages = schema["x-kubernetes-validations"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["message"].as_str().map(str::to_string))
        .collect();
    let default = schema.get("default").map(Value::to_string);
    out.push((path.to_string(), default, messages));
    for (name, child) in schema["properties"].as_object().into_iter().flatten() {
        let child_path = if path.is_empty() {
            name.clone()
        } else {
            format!("{path}.{name}")
        };
        expected(child, &child_path, out);
    }
    for (suffix, inner) in [
        ("[]", &schema["items"]),
        (".*", &schema["additionalProperties"]),
    ] {
        if inner["properties"].is_object() {
            expected(inner, &format!("{path}{suffix}"), out);
        }
    }
}

/// The table row of `path` on `page`, unescaped; the whole-object rules for the root.
fn row_of<'a>(page: &'a str, path: &str) -> Option<&'a str> {
    if path.is_empty() {
        let start = page.find("## Rules on the whole object")?;
        let end = page[start..]
            .find("## Fields")
            .map_or(page.len(), |e| start + e);
        return Some(&page[start..end]);
    }
    let cell = format!("| `{path}` |");
    page.lines().find(|l| l.starts_with(&cell))
}

#[test]
fn the_reference_lists_every_field_default_and_rule_message() {
    let root = repo_root();
    let mut problems = Vec::new();
    for crd in all_crds() {
        let file = page_path(&crd);
        let page = std::fs::read_to_string(root.join(&file))
            .unwrap_or_else(|e| panic!("{file}: {e}; run `make crds`"));
        let version = &crd.spec.versions[0];
        let schema = serde_json::to_value(
            version
                .schema
                .as_ref()
                .unwrap()
                .open_api_v3_schema
                .as_ref()
                .unwrap(),
        )
        .unwrap();
        let mut fields = Vec::new();
        expected(&schema, "", &mut fields);
        assert!(
            fields.len() > 20,
            "{file}: only {} fields walked",
            fields.len()
        );
        for (path, default, messages) in fields {
            let Some(row) = row_of(&page, &path) else {
                problems.push(format!("{file}: no row for `{path}`"));
                continue;
            };
            let row = unescape(row);
            if let Some(d) = default.filter(|d| !row.contains(d.as_str())) {
                problems.push(format!("{file}: `{path}` lacks its default {d}"));
            }
            for m in messages.iter().filter(|m| !row.contains(m.as_str())) {
                problems.push(format!("{file}: `{path}` lacks the message {m:?}"));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
