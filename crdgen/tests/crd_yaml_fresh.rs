//! The committed generated files (CRD YAML in crds/yaml and the chart, the Argo CD health
//! scripts) must equal what the Rust types and the templates generate.
use msgbench_crdgen::generate::{all_crds, repo_root, stale_files, CHART_DIR};

#[test]
fn committed_crd_yaml_matches_the_types() {
    let stale = stale_files(&repo_root()).expect("render CRDs");
    assert!(
        stale.is_empty(),
        "stale generated files, run `make crds`: {stale:?}"
    );
}

#[test]
fn chart_templates_are_gated_and_kept() {
    let root = repo_root();
    for crd in all_crds() {
        let name = msgbench_crdgen::generate::file_name(&crd);
        let text = std::fs::read_to_string(root.join(CHART_DIR).join(&name)).expect("chart CRD");
        assert!(
            text.starts_with("{{- if .Values.crds.install }}\n"),
            "{name}: not gated"
        );
        assert!(
            text.trim_end().ends_with("{{- end }}"),
            "{name}: gate not closed"
        );
        assert!(
            text.contains("helm.sh/resource-policy: keep"),
            "{name}: not kept"
        );
        // Any other `{{` would be parsed by Helm as a template action.
        assert_eq!(
            text.matches("{{").count(),
            2,
            "{name}: stray template braces"
        );
    }
}
