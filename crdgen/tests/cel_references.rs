//! Every `self.a.b` path in a CEL rule names a field that exists in the schema where the rule
//! sits. The API server would refuse the CRD otherwise; this catches a renamed field (e.g. in the
//! shared Workload type) in `make unit`, before any cluster is involved.
use msgbench_crdgen::generate::all_crds;
use serde_json::Value;

/// `self.x.y` paths in `rule`, as segment lists, with the character after each path.
fn self_paths(rule: &str) -> Vec<(Vec<String>, Option<char>)> {
    let mut out = Vec::new();
    let mut rest = rule;
    while let Some(i) = rest.find("self.") {
        let before = rest[..i].chars().last();
        let tail = &rest[i + 5..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
            .unwrap_or(tail.len());
        // `oldSelf.` also contains `Self.`, not `self.`; skip identifiers ending in `self`.
        if !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
            let segs = tail[..end]
                .split('.')
                .filter(|s| !s.is_empty())
                .map(String::from);
            out.push((segs.collect(), tail[end..].chars().next()));
        }
        rest = &tail[end..];
    }
    out
}

fn check_node(schema: &Value, at: &str, problems: &mut Vec<String>) {
    for rule in schema["x-kubernetes-validations"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let text = rule["rule"].as_str().unwrap_or_default();
        for (segs, next) in self_paths(text) {
            let mut node = schema;
            for (i, seg) in segs.iter().enumerate() {
                match node.get("properties").and_then(|p| p.get(seg)) {
                    Some(child) => node = child,
                    // The root's metadata is implicit in the schema but visible to CEL.
                    None if seg == "metadata" && i == 0 && !at.contains('.') => break,
                    // Objects without declared properties are opaque.
                    None if node.get("properties").is_none() => break,
                    // A method call on the last segment, e.g. `self.url.startsWith(`.
                    None if i == segs.len() - 1 && next == Some('(') => break,
                    None => {
                        problems.push(format!("{at}: rule `{text}` names unknown field {seg}"));
                        break;
                    }
                }
            }
        }
    }
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (k, v) in props {
            check_node(v, &format!("{at}.{k}"), problems);
        }
    }
    if schema.get("items").is_some() {
        check_node(&schema["items"], &format!("{at}[]"), problems);
    }
}

#[test]
fn cel_rules_name_existing_fields() {
    let mut problems = Vec::new();
    let mut rules = 0;
    for crd in all_crds() {
        let crd = serde_json::to_value(&crd).expect("crd json");
        let kind = crd["spec"]["names"]["kind"]
            .as_str()
            .expect("kind")
            .to_string();
        let root = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
        rules += serde_json::to_string(root)
            .expect("json")
            .matches("\"rule\"")
            .count();
        check_node(root, &kind, &mut problems);
    }
    assert!(rules >= 15, "only {rules} CEL rules generated");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn path_extraction_handles_methods_and_old_self() {
    let paths = self_paths("self.url.startsWith('x') && self == oldSelf && has(self.a.b)");
    let segs: Vec<Vec<String>> = paths.iter().map(|(s, _)| s.clone()).collect();
    assert_eq!(segs, [vec!["url", "startsWith"], vec!["a", "b"]]);
    assert_eq!(paths[0].1, Some('('));
}
