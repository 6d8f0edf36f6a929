//! The committed fixtures are what tests/common builds; `MSGBENCH_UPDATE_FIXTURES=1 cargo test
//! -p kubectl-msgbench --test fixtures_fresh` rewrites them after a change to the builders.
mod common;

#[test]
fn committed_fixtures_match_their_builders() {
    let all = [
        ("variants-run.yaml", common::variants_yaml()),
        ("plain-run.yaml", common::plain_yaml()),
        ("runner-result.json", common::runner_json()),
    ];
    let update = std::env::var_os("MSGBENCH_UPDATE_FIXTURES").is_some();
    for (name, text) in all {
        let path = common::fixture(name);
        if update {
            std::fs::write(&path, &text).unwrap();
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == text,
            "{name} is stale: rerun with MSGBENCH_UPDATE_FIXTURES=1"
        );
    }
}
