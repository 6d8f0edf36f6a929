//! The cluster as a whole: the connection to it (kubeconfig, repository root, project cache,
//! tools), the contract with the cluster scripts, its flavour (local or kind) and what differs
//! between them, the chart installed in it, its nodes, the operator's Lease, and the local OCI
//! registry. May touch: the helm release in `msgbench-system` and the operator's scale, Node
//! objects (cordon), the nodes themselves (local: `e2e/cluster/node`; kind: `docker
//! pause`/`unpause` on the kind engine), the registry through `e2e/registry/*` and the README's
//! install blocks, the first node's containerd image list (read only), the project cache and
//! tools, and the kubectl plugin's debug build; never what a test's namespace holds (that is
//! `harness`).
mod connect;

pub mod chart;
pub mod command;
pub mod exported;
pub mod flavour;
pub mod kind_engine;
mod lanes;
pub mod node;
pub mod nodes;
pub mod operator_lease;
pub mod registry;

pub use connect::*;
