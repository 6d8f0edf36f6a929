//! Everything msgbench writes from its API types, so `msgbench-crds` stays types only: the CRD
//! YAML (plain and the chart's), the CRD reference page of the user guide, and the Argo CD
//! health scripts. `make crds` writes them (`crdgen --write`), `make crds-check` fails on a stale
//! one (`crdgen --check`).
#![forbid(unsafe_code)]

pub mod argocd_health;
pub mod error;
pub mod generate;
pub mod reference;
