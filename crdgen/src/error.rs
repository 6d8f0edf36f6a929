//! Why a generated file could not be rendered (its own module: both the CRD files and the
//! health scripts return it, and neither imports the other for it).
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum GenerateError {
    #[error("render YAML: {0}")]
    Yaml(#[from] serde_norway::Error),
    #[error("read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{template}: {problem}")]
    Template { template: String, problem: String },
}
