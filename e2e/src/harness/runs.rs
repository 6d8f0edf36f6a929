//! BenchmarkRun helpers shared by the e2e tests: read a status field or condition, wait for the end.
use crate::kinds::{self, Kind};
use crate::{wait, TestContext};
use anyhow::Result;
use kube::api::DynamicObject;
use serde_json::Value;
use std::time::Duration;

/// The value at JSON pointer `ptr` (e.g. `/status/phase`), `Null` when absent.
pub fn field<'a>(o: &'a DynamicObject, ptr: &str) -> &'a Value {
    o.data.pointer(ptr).unwrap_or(&Value::Null)
}

/// Waits until BenchmarkRun `name` ended, passed or failed: `Complete=True` for its current
/// generation (what the user guide's CI gate waits for).
pub async fn finished(ctx: &TestContext, name: &str, timeout: Duration) -> Result<DynamicObject> {
    let api = Kind::BenchmarkRun.api(&ctx.client, &ctx.ns);
    wait::until(
        &api,
        name,
        timeout,
        &format!("BenchmarkRun {name} finished (Complete=True)"),
        |o| kinds::is_true_now(o, "Complete"),
    )
    .await
}

/// `status` of condition `type_`, `""` when absent.
pub fn condition_status<'a>(o: &'a DynamicObject, type_: &str) -> &'a str {
    kinds::condition(o, type_)
        .and_then(|c| c["status"].as_str())
        .unwrap_or("")
}

/// A run that ended within `bound_s` seconds of its creation (completionTime −
/// creationTimestamp): a failure found at the first connect, not at the end of a window.
pub fn ended_within(br: &DynamicObject, bound_s: i64) -> Result<()> {
    use anyhow::Context;
    let done: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time =
        serde_json::from_value(field(br, "/status/completionTime").clone())
            .context("completionTime")?;
    let created = (br.metadata.creation_timestamp.as_ref()).context("creationTimestamp")?;
    let secs = done.0.as_second() - created.0.as_second();
    anyhow::ensure!(
        secs < bound_s,
        "{} ended {secs} s after its creation (bound: {bound_s} s)",
        br.metadata.name.as_deref().unwrap_or("?")
    );
    Ok(())
}

/// A run that Succeeded with exactly `want` messages published and every one received.
pub fn delivered_exactly(br: &DynamicObject, want: u64) -> Result<()> {
    use anyhow::{ensure, Context};
    let name = br.metadata.name.as_deref().unwrap_or("?");
    ensure!(
        field(br, "/status/phase") == "Succeeded",
        "{name}: verdict {}, conditions {}",
        field(br, "/status/verdict"),
        crate::kinds::conditions_summary(br)
    );
    let count = |p: &str| {
        field(br, p)
            .as_u64()
            .with_context(|| format!("{name}: {p}"))
    };
    let (published, received) = (
        count("/status/result/published")?,
        count("/status/result/received")?,
    );
    ensure!(
        published == want && received == published,
        "{name}: published {published}, received {received}"
    );
    Ok(())
}

/// `br` failed with `reason`, a failure of the target's (refused login, TLS, unreachable), and
/// its TargetReady condition says so too: False with that reason, not True beside the verdict.
pub fn target_refused(br: &DynamicObject, reason: &str) -> Result<()> {
    use anyhow::ensure;
    let name = br.metadata.name.as_deref().unwrap_or("?");
    ensure!(
        field(br, "/status/verdict/reason") == reason,
        "{name}: want {reason}, verdict {}",
        field(br, "/status/verdict")
    );
    let ready = crate::kinds::condition(br, msgbench_crds::conditions::TARGET_READY);
    ensure!(
        ready.is_some_and(|c| c["status"] == "False" && c["reason"] == reason),
        "{name}: TargetReady should be False with {reason}: {ready:?}"
    );
    Ok(())
}

/// Creates the run `manifest` (named `name`) and waits for it to fail fast: Failed, and ended
/// within 30 s of its creation (a refusal found at the first connect, not at the end of a
/// connect window).
pub async fn refused_fast(ctx: &TestContext, name: &str, manifest: &str) -> Result<DynamicObject> {
    kinds::create(&ctx.client, &ctx.ns, manifest).await?;
    let br = finished(ctx, name, Duration::from_secs(120)).await?;
    anyhow::ensure!(
        field(&br, "/status/phase") == "Failed",
        "{name} should fail"
    );
    ended_within(&br, 30)?;
    Ok(br)
}

/// `br` failed `TargetTLSFailed` (and TargetReady says so) naming `issuer`: the issuer of the
/// certificate the runner saw and could not trust.
pub fn untrusted_ca_named(br: &DynamicObject, issuer: &str) -> Result<()> {
    let verdict = field(br, "/status/verdict").to_string();
    target_refused(br, "TargetTLSFailed")?;
    anyhow::ensure!(
        verdict.contains(issuer),
        "an untrusted CA should fail TargetTLSFailed naming the issuer the runner saw: {verdict}"
    );
    Ok(())
}
