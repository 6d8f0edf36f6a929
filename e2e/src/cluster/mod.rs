//! The cluster as a whole: the connection to it (kubeconfig, repository root, project cache,
//! tools), the contract with the cluster scripts, the chart installed in it, its nodes, the
//! operator's Lease, and the local OCI registry. May touch: the helm release in
//! `msgbench-system` and the operator's scale, Node objects (cordon), the local cluster's nodes
//! through `e2e/cluster/node`, the registry through `e2e/registry/*` and the README's install
//! blocks, the host's containerd image list (read only), the project cache and tools, and the
//! kubectl plugin's debug build; never what a test's namespace holds (that is `harness`).
mod connect;

pub mod chart;
pub mod contract;
pub mod node;
pub mod nodes;
pub mod operator_lease;
pub mod registry;

pub use connect::*;
