//! Bad specs never reach the operator: the API server rejects them (server-side dry run) with a
//! message naming the offending field. Cases from the issue, plus the crds engineer's fixtures in
//! crds/tests/invalid/ when present.
use anyhow::{bail, ensure, Result};
use msgbench_e2e::cluster::repo_root;
use msgbench_e2e::kinds;
use msgbench_e2e::{run, TestContext};

/// (what, manifest, text the rejection must contain)
const CASES: &[(&str, &str, &str)] = &[
    (
        "non-integer CPU with pinning",
        r#"
apiVersion: msgbench.dev/v1alpha1
kind: JetStreamCluster
metadata: {name: bad-cpu}
spec:
  resources: {limits: {cpu: 500m, memory: 256Mi}}
  tuning: {cpuPinning: true}
"#,
        "resources.limits.cpu",
    ),
    (
        "unsafe sysctl without opt-in",
        r#"
apiVersion: msgbench.dev/v1alpha1
kind: MqttBroker
metadata: {name: bad-sysctl}
spec:
  tuning:
    sysctls: [{name: net.core.somaxconn, value: "4096"}]
"#,
        "sysctls",
    ),
    (
        "replicas out of range",
        r#"
apiVersion: msgbench.dev/v1alpha1
kind: JetStreamCluster
metadata: {name: bad-replicas}
spec:
  replicas: 7
"#,
        "spec.replicas",
    ),
    (
        "mosquitto with 2 replicas",
        r#"
apiVersion: msgbench.dev/v1alpha1
kind: MqttBroker
metadata: {name: bad-mosquitto}
spec:
  engine: mosquitto
  replicas: 2
"#,
        "replicas",
    ),
];

/// A valid spec passes the same dry run, so the rejections above are about the fields, not the kind.
const VALID: &str = r#"
apiVersion: msgbench.dev/v1alpha1
kind: JetStreamCluster
metadata: {name: good}
spec:
  replicas: 3
  resources: {limits: {cpu: 1, memory: 256Mi}}
  tuning: {cpuPinning: true, sysctls: [{name: net.ipv4.tcp_keepalive_time, value: "300"}]}
"#;

#[tokio::test]
async fn bad_specs_are_rejected_naming_the_field() {
    run("validation", body).await;
}

async fn dry_run(ctx: &TestContext, manifest: &str) -> Result<std::result::Result<(), String>> {
    kinds::dry_run(&ctx.client, &ctx.ns, manifest).await
}

async fn body(ctx: TestContext) -> Result<()> {
    if let Err(msg) = dry_run(&ctx, VALID).await? {
        bail!("the valid control spec was rejected: {msg}");
    }
    // The crds engineer's valid fixtures pass the real API server too.
    for (what, manifest, _) in fixtures("valid")? {
        if let Err(msg) = dry_run(&ctx, &manifest).await? {
            bail!("{what} was rejected: {msg}");
        }
    }
    let mut cases: Vec<(String, String, Option<String>)> = CASES
        .iter()
        .map(|(w, m, e)| (w.to_string(), m.to_string(), Some(e.to_string())))
        .collect();
    cases.extend(fixtures("invalid")?);
    ensure!(cases.len() >= CASES.len(), "no cases");
    let mut failures = Vec::new();
    for (what, manifest, expect) in &cases {
        match dry_run(&ctx, manifest).await? {
            Ok(()) => failures.push(format!("{what}: accepted")),
            Err(msg) => {
                eprintln!("{what}: rejected: {msg}");
                if let Some(expect) = expect {
                    if !msg.contains(expect.as_str()) {
                        failures.push(format!("{what}: message does not name {expect:?}: {msg}"));
                    }
                }
                if !msg.contains("spec.") && !msg.contains("metadata.name") {
                    failures.push(format!("{what}: message names no field: {msg}"));
                }
            }
        }
    }
    ensure!(
        failures.is_empty(),
        "{} of {} bad specs not rejected properly:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
    Ok(())
}

/// crds/tests/<set>/*.yaml; a `# expect: <text>` line names the text the rejection must contain.
fn fixtures(set: &str) -> Result<Vec<(String, String, Option<String>)>> {
    let dir = repo_root().join("crds/tests").join(set);
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for entry in entries {
        let path = entry?.path();
        if !matches!(
            path.extension().and_then(|e| e.to_str()),
            Some("yaml" | "yml")
        ) {
            continue;
        }
        let manifest = std::fs::read_to_string(&path)?;
        let expect = manifest.lines().find_map(|l| {
            l.trim()
                .strip_prefix("# expect:")
                .map(|e| e.trim().to_string())
        });
        out.push((format!("fixture {}", path.display()), manifest, expect));
    }
    out.sort();
    Ok(out)
}
