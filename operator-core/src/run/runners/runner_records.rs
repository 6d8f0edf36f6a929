//! A runner's records, checked against the plan before they are merged.
use k8s_openapi::api::core::v1::Pod;
use std::collections::BTreeMap;

/// Runner id of an Indexed Job pod: its completion index + 1 (what the agent uses).
pub fn runner_id(p: &Pod) -> Option<u16> {
    let key = "batch.kubernetes.io/job-completion-index";
    let from = |m: Option<&BTreeMap<String, String>>| m.and_then(|m| m.get(key)).cloned();
    let idx = from(p.metadata.labels.as_ref()).or_else(|| from(p.metadata.annotations.as_ref()))?;
    idx.parse::<u16>().ok()?.checked_add(1)
}

/// Pure: the records of one runner, checked to be exactly trials 1..=`trials`.
pub fn complete_records<R>(
    runner: u16,
    pod: &str,
    records: BTreeMap<u32, R>,
    damaged: &BTreeMap<u32, String>,
    trials: u32,
) -> Result<Vec<R>, String> {
    let mut problems = Vec::new();
    for t in 1..=trials {
        if records.contains_key(&t) {
            continue;
        }
        let why = damaged
            .get(&t)
            .cloned()
            .unwrap_or_else(|| "no record".into());
        problems.push(format!("trial {t}: {why}"));
    }
    if let Some(extra) = records.keys().find(|t| **t == 0 || **t > trials) {
        problems.push(format!("trial {extra}: not in the plan of {trials} trials"));
    }
    if problems.is_empty() {
        Ok(records.into_values().collect())
    } else {
        Err(format!(
            "runner {runner} (pod {pod}): {}",
            problems.join("; ")
        ))
    }
}
