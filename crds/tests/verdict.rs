//! Whether a run passed is `status.phase` (Succeeded or Failed); the verdict says only why
//! (`reason`, `message`). A status written before `verdict.outcome` was removed still reads: the
//! old field is ignored and never written back.
use msgbench_crds::benchmark_run::{BenchmarkRunStatus, Phase};

#[test]
fn an_old_verdict_outcome_is_ignored_and_the_phase_says_how_the_run_ended() {
    let st: BenchmarkRunStatus = serde_json::from_value(serde_json::json!({
        "phase": "Failed",
        "verdict": {"outcome": "Failed", "reason": "ThresholdsNotMet", "message": "p99"},
        "history": [{"generation": 1, "verdict": {"outcome": "Passed", "reason": "Succeeded"}}],
    }))
    .expect("a status with the old verdict.outcome");
    assert_eq!(st.phase, Some(Phase::Failed));
    assert_eq!(
        st.history[0].phase, None,
        "old history entries have no phase"
    );
    let v = serde_json::to_value(&st).unwrap();
    assert_eq!(
        v["verdict"],
        serde_json::json!({"reason": "ThresholdsNotMet", "message": "p99"})
    );
    assert_eq!(
        v["history"][0]["verdict"],
        serde_json::json!({"reason": "Succeeded"})
    );
}
