//! msgbench-lazyfs (placeholder header, completed with the FUSE adapter).
#![forbid(unsafe_code)]

pub mod backing;
pub mod cache;
