//! The runners: their Job and ConfigMap (`build`), who may reach them (`runner_access`), their
//! pods as read (`runner_pods`, `runner_failure`), the records they leave (`runner_records`),
//! and when they stop early (`stop_when`, `stop_runners`).
pub mod build;
pub mod runner_access;
pub mod runner_failure;
pub mod runner_pods;
pub mod runner_records;
pub mod stop_runners;
pub mod stop_when;
