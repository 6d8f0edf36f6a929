//! Servers that did not answer a sample: kept in `serverUsage.readErrors` with their latest
//! error, so a server that cannot be read says which one and why instead of only dropping out.
use crate::status_text::plain_bounded;
use msgbench_crds::server_usage::{ServerReadError, MAX_READ_ERROR, MAX_READ_ERRORS};

/// Counts each failed read of this sampling instant against its server, keeping the latest
/// error (bounded); the first [`MAX_READ_ERRORS`] servers to fail are listed.
pub fn record(errors: &mut Vec<ServerReadError>, failed: &[(String, String)], now_ms: i64) {
    for (pod, why) in failed {
        let at = match errors.iter().position(|e| &e.pod == pod) {
            Some(i) => i,
            None if errors.len() < MAX_READ_ERRORS => {
                errors.push(ServerReadError {
                    pod: pod.clone(),
                    ..ServerReadError::default()
                });
                errors.len() - 1
            }
            None => continue,
        };
        let e = &mut errors[at];
        e.failures += 1;
        e.error = plain_bounded(why, MAX_READ_ERROR);
        e.last_failed_ms = Some(now_ms);
    }
}

/// Why there are no figures yet, when no server answered: the path, and the first server's
/// latest error when there is one.
pub fn none_answered(path: &str, errors: &[ServerReadError]) -> String {
    match errors.first() {
        None => format!("no server answered {path} yet"),
        Some(e) if errors.len() == 1 => {
            format!("no server answered {path} yet: {}: {}", e.pod, e.error)
        }
        Some(e) => format!(
            "no server answered {path} yet: {}: {} (and {} more in readErrors)",
            e.pod,
            e.error,
            errors.len() - 1
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_that_fails_is_counted_with_its_latest_error_and_bounded() {
        let mut errors = Vec::new();
        let refused = |pod: &str, why: &str| vec![(pod.to_string(), why.to_string())];
        record(&mut errors, &refused("a:8222", "connection refused"), 1_000);
        record(
            &mut errors,
            &refused("a:8222", "no answer within 2s"),
            6_000,
        );
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].failures, 2);
        assert_eq!(errors[0].error, "no answer within 2s");
        assert_eq!(errors[0].last_failed_ms, Some(6_000));
        // Bounded: a long error is cut, and only the first servers to fail are listed.
        record(&mut errors, &refused("b", &"x".repeat(10_000)), 7_000);
        assert!(
            errors[1].error.len() <= MAX_READ_ERROR + 3,
            "{}",
            errors[1].error.len()
        );
        let many: Vec<(String, String)> = (0..40).map(|i| (format!("p{i}"), "e".into())).collect();
        record(&mut errors, &many, 8_000);
        assert_eq!(errors.len(), MAX_READ_ERRORS);
        assert_eq!(errors[0].pod, "a:8222", "the first to fail stay listed");
    }

    #[test]
    fn none_answered_names_the_path_and_the_latest_error() {
        assert_eq!(none_answered("/varz", &[]), "no server answered /varz yet");
        let e = |pod: &str| ServerReadError {
            pod: pod.into(),
            failures: 1,
            error: "connection refused".into(),
            last_failed_ms: Some(1_000),
        };
        assert_eq!(
            none_answered("/varz", &[e("n0:8222")]),
            "no server answered /varz yet: n0:8222: connection refused"
        );
        let two = none_answered("/varz", &[e("n0:8222"), e("n1:8222")]);
        assert!(two.ends_with("(and 1 more in readErrors)"), "{two}");
    }
}
