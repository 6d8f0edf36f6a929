//! `kubectl msgbench stats paired` as bench/paired.py runs it: JSON on stdin, one line per
//! comparison, checked against values worked by hand, with the skip rules of the bench tables
//! (a ratio skips a repeat with a null or a value ≤ 0, a difference one with a null).
use serde_json::{json, Value};
use std::f64::consts::LN_2;
use std::io::Write;
use std::process::{Command, Stdio};

/// t(0.975, 2): the 95 % quantile for 3 repeats.
const T2: f64 = 4.302_653;

fn stats(kind: &str, input: &Value) -> (i32, Vec<Value>, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_kubectl-msgbench"))
        .args(["stats", "paired", "--kind", kind])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input.to_string().as_bytes()).unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    let lines = String::from_utf8(out.stdout).unwrap();
    let lines = lines.lines().map(|l| serde_json::from_str(l).unwrap());
    let stderr = String::from_utf8(out.stderr).unwrap();
    (out.status.code().unwrap(), lines.collect(), stderr)
}

fn near(v: &Value, key: &str, want: f64) {
    let got = v[key]
        .as_f64()
        .unwrap_or_else(|| panic!("{key} missing in {v}"));
    assert!((got - want).abs() < 1e-5, "{key}: {got}, want {want}");
}

fn nulls(v: &Value, keys: &[&str]) {
    for k in keys {
        assert!(v[k].is_null(), "{k} should be null in {v}");
    }
}

#[test]
fn ratio_is_a_geometric_mean_with_a_t_interval_on_the_logs() {
    // Kept: 1/2, 4/2, 3/3 (logs −ln 2, ln 2, 0: mean 0, sd ln 2). Skipped: a null, a 0 on
    // either side, a negative theirs; the extra ours has no partner.
    let input = json!([
        {"ours": [1, 4, 3, null, 5, 0, 2, 9], "theirs": [2, 2, 3, 1, 0, 1, -1]},
        {"ours": [0.0021], "theirs": [1]},
        {"ours": [null, 0], "theirs": [1, 1]},
    ]);
    let (code, out, stderr) = stats("ratio", &input);
    assert_eq!((code, out.len()), (0, 3), "{stderr}");
    let half = T2 * LN_2 / 3f64.sqrt();
    assert_eq!(out[0]["n"], 3);
    near(&out[0], "estimate", 1.0);
    near(&out[0], "low", (-half).exp());
    near(&out[0], "high", half.exp());
    near(&out[0], "min", 0.5);
    near(&out[0], "max", 2.0);
    // One repeat: its ratio unrounded (the status would say 0.002; exp(ln x) may miss x by an
    // ulp), no interval.
    assert_eq!(out[1]["n"], 1);
    let est = out[1]["estimate"].as_f64().unwrap();
    assert!((est - 0.0021).abs() < 1e-15, "{est}");
    assert_eq!(out[1]["min"].as_f64(), Some(0.0021));
    nulls(&out[1], &["low", "high"]);
    assert_eq!(out[2]["n"], 0);
    nulls(&out[2], &["estimate", "low", "high", "min", "max"]);
}

#[test]
fn difference_is_a_mean_with_a_t_interval() {
    // Kept: 2−1, 4−2, 0−(−3) (zeros and negatives are values here): mean 2, sd 1. Skipped: nulls.
    let input = json!([
        {"ours": [2, 4, 0, null, 9], "theirs": [1, 2, -3, 7, null]},
        {"ours": [null], "theirs": [1]},
    ]);
    let (code, out, stderr) = stats("difference", &input);
    assert_eq!((code, out.len()), (0, 2), "{stderr}");
    let half = T2 / 3f64.sqrt();
    assert_eq!(out[0]["n"], 3);
    near(&out[0], "estimate", 2.0);
    near(&out[0], "low", 2.0 - half);
    near(&out[0], "high", 2.0 + half);
    near(&out[0], "min", 1.0);
    near(&out[0], "max", 3.0);
    assert_eq!(out[1]["n"], 0);
    nulls(&out[1], &["estimate", "low", "high", "min", "max"]);
}

#[test]
fn bad_input_fails_saying_what_it_wants() {
    let (code, out, stderr) = stats("ratio", &json!({"ours": [1]}));
    assert_eq!((code, out.len()), (1, 0));
    assert!(stderr.contains("want a JSON list"), "{stderr}");
}
