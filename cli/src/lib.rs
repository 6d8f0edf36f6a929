//! `kubectl msgbench`: reports, exports, comparisons and CI gates of msgbench BenchmarkRuns,
//! read from the cluster or from files, and the paired statistics the bench scripts use. A
//! library so the tests drive exactly what the binary runs.
#![forbid(unsafe_code)]

pub mod browser;
pub mod cluster;
pub mod compare;
pub mod doc;
pub mod export;
mod fault_tables;
pub mod gate;
pub mod gate_cmd;
pub mod html;
pub mod junit;
pub mod markdown;
pub mod model;
pub mod output;
pub mod paired;
pub mod plots;
pub mod report;
mod segment_tables;
pub mod selection;
pub mod source;
pub mod stats;
pub mod summary;
mod tables;
pub mod tagging;
pub mod thresholds;
