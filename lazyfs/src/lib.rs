//! msgbench-lazyfs (placeholder header, completed with the wrapper).
#![forbid(unsafe_code)]

pub mod backing;
pub mod cache;
pub mod fs;
pub mod inodes;
