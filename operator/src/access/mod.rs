//! How the operator reaches pods and what it may do: the exact API access it uses (`rbac`, the
//! source of `operator/RBAC.md` and the chart's roles), its runner-control signing key in one
//! Secret (`control_key`), HTTP to pods on their IPs (`pod_http`). It may read that Secret and
//! call pods; it decides nothing about a server or a run.
pub mod control_key;
pub mod pod_http;
pub mod rbac;
