//! `kubectl msgbench`: reports, exports and comparisons of msgbench BenchmarkRuns, read from
//! the cluster or from files. A library so the tests drive exactly what the binary runs.
#![forbid(unsafe_code)]

pub mod browser;
pub mod cluster;
pub mod compare;
pub mod doc;
pub mod export;
mod fault_tables;
pub mod html;
pub mod markdown;
pub mod model;
pub mod paired;
pub mod plots;
pub mod report;
mod segment_tables;
pub mod source;
mod tables;
pub mod tagging;
pub mod thresholds;
