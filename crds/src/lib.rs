//! msgbench API types: group `msgbench.dev`, version `v1alpha1`. Types only, no client code.
#![forbid(unsafe_code)]

pub mod workload;
