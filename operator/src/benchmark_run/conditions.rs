//! BenchmarkRun conditions: TargetReady, RunnersReady, Complete, Succeeded (the CI gate).
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

pub const TARGET_READY: &str = "TargetReady";
pub const RUNNERS_READY: &str = "RunnersReady";
pub const COMPLETE: &str = "Complete";
pub const SUCCEEDED: &str = "Succeeded";

/// Sets a condition; the transition time moves only when the status flips.
pub fn set(
    conds: &mut Vec<Condition>,
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
    generation: Option<i64>,
    now: &Time,
) {
    let message: String = message.chars().take(1024).collect();
    match conds.iter_mut().find(|c| c.type_ == type_) {
        Some(c) => {
            if c.status != status {
                c.last_transition_time = now.clone();
            }
            c.status = status.into();
            c.reason = reason.into();
            c.message = message;
            c.observed_generation = generation;
        }
        None => conds.push(Condition {
            type_: type_.into(),
            status: status.into(),
            reason: reason.into(),
            message,
            observed_generation: generation,
            last_transition_time: now.clone(),
        }),
    }
}

pub fn get<'a>(conds: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conds.iter().find(|c| c.type_ == type_)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transition_time_moves_only_on_a_flip() {
        let t = |s: i64| Time(k8s_openapi::jiff::Timestamp::from_second(s).unwrap());
        let mut c = Vec::new();
        set(&mut c, SUCCEEDED, "Unknown", "Pending", "", Some(1), &t(10));
        set(&mut c, SUCCEEDED, "Unknown", "Running", "", Some(1), &t(20));
        assert_eq!(c[0].last_transition_time, t(10));
        assert_eq!(c[0].reason, "Running");
        set(&mut c, SUCCEEDED, "True", "Succeeded", "", Some(1), &t(30));
        assert_eq!(c[0].last_transition_time, t(30));
        assert_eq!(c.len(), 1);
    }
}
