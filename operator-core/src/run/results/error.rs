//! Why runner records did not become a result. Every variant ends a run as `ResultsLost`, its
//! message in the condition, so each names what is wrong in words a user can act on.
use runner_api::agent::RecordError;
use runner_api::result::MergeError;

#[derive(Debug, thiserror::Error)]
pub enum ResultsError {
    /// Zero trials asked for: there is no result to give, not an empty one.
    #[error("no trials")]
    NoTrials,
    /// A held record is not a result: merging the others would give a partial one.
    #[error("{runner}: record does not decode: {source}")]
    RecordDoesNotDecode { runner: String, source: RecordError },
    /// A trial lacks some runner's record: its figures would be silently partial.
    #[error("trial {trial}: {got} of {want} runner results")]
    MissingRunnerResults { trial: u32, got: usize, want: usize },
    /// Records that are not parts of one run (format, workload or phases differ).
    #[error(transparent)]
    Merge(#[from] MergeError),
    /// A variant's records did not merge: which variant, then why.
    #[error("variant {variant}: {source}")]
    Variant {
        variant: String,
        source: Box<ResultsError>,
    },
    /// Variants are merged by round in the recorded order; without it rounds have no place.
    #[error("status.schedule is missing: the variants' order was never recorded")]
    ScheduleMissing,
}
