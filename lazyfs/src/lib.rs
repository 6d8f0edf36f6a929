//! msgbench-lazyfs (placeholder header, completed with the wrapper).
#![forbid(unsafe_code)]

pub mod backing;
pub mod cache;
pub mod control;
pub mod fs;
pub mod inodes;
pub mod wrapper;
