//! A run the operator ended (BarrierTimeout, DeadlineExceeded, TargetNotReady after pods…)
//! must not leave runners behind: pending pods would be scheduled later and load the server
//! during someone else's run. Suspending the Job deletes its active pods and keeps the Job,
//! its finished pods and their logs for debugging until `ttlSecondsAfterFinished`.
use k8s_openapi::api::batch::v1::Job;

/// Whether `job` still has pods running or waiting and is not suspended yet.
pub fn has_active_runners(job: &Job) -> bool {
    let suspended = job.spec.as_ref().and_then(|s| s.suspend) == Some(true);
    let active = job.status.as_ref().and_then(|s| s.active).unwrap_or(0);
    let ready = job.status.as_ref().and_then(|s| s.ready).unwrap_or(0);
    !suspended && (active > 0 || ready > 0)
}

#[cfg(test)]
mod tests {
    use super::has_active_runners;
    use k8s_openapi::api::batch::v1::{Job, JobSpec, JobStatus};

    fn job(suspend: Option<bool>, active: Option<i32>) -> Job {
        Job {
            spec: Some(JobSpec {
                suspend,
                ..JobSpec::default()
            }),
            status: Some(JobStatus {
                active,
                ..JobStatus::default()
            }),
            ..Job::default()
        }
    }

    #[test]
    fn only_unsuspended_jobs_with_active_pods_are_stopped() {
        assert!(has_active_runners(&job(None, Some(2))));
        assert!(has_active_runners(&job(Some(false), Some(1))));
        assert!(!has_active_runners(&job(Some(true), Some(2))));
        assert!(!has_active_runners(&job(None, Some(0))));
        assert!(!has_active_runners(&job(None, None)));
    }
}
