//! BenchmarkRun helpers shared by the e2e tests: read a status field, wait for a verdict.
use crate::kinds::Kind;
use crate::{wait, TestContext};
use anyhow::Result;
use kube::api::DynamicObject;
use serde_json::Value;
use std::time::Duration;

/// The value at JSON pointer `ptr` (e.g. `/status/phase`), `Null` when absent.
pub fn field<'a>(o: &'a DynamicObject, ptr: &str) -> &'a Value {
    o.data.pointer(ptr).unwrap_or(&Value::Null)
}

/// Waits until BenchmarkRun `name` is Succeeded or Failed.
pub async fn finished(ctx: &TestContext, name: &str, timeout: Duration) -> Result<DynamicObject> {
    let api = Kind::BenchmarkRun.api(&ctx.client, &ctx.ns);
    wait::until(
        &api,
        name,
        timeout,
        &format!("BenchmarkRun {name} finished"),
        |o| {
            matches!(
                o.data.pointer("/status/phase").and_then(Value::as_str),
                Some("Succeeded" | "Failed")
            )
        },
    )
    .await
}
