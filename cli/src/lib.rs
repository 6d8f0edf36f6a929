//! `kubectl msgbench`: reports, exports, comparisons and CI gates of msgbench BenchmarkRuns,
//! read from the cluster or from files, and the paired statistics the bench scripts use. A
//! library so the tests drive exactly what the binary runs.
#![forbid(unsafe_code)]

pub mod browser;
pub mod compare_cmd;
pub mod doc;
pub mod export;
mod fault_tables;
pub mod gate;
pub mod gate_cmd;
pub mod html;
pub mod junit;
pub mod kube_flags;
pub mod markdown;
pub mod output;
pub mod paired_rows;
pub mod plots;
pub mod report_cmd;
pub mod run_view;
mod segment_tables;
pub mod selection;
pub mod source;
pub mod stats_cmd;
pub mod summary;
mod tables;
pub mod tagging;
pub mod thresholds;
