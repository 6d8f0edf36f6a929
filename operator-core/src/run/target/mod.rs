//! The run's target: its credentials (`target_auth`), its readiness as the runners will reach it
//! (`endpoint_readiness`), one run at a time on it (`target_lock`), the names runs share on it
//! (`shared_names`) and the sweep of a run's streams from it (`stream_sweep`).
pub mod endpoint_readiness;
pub mod shared_names;
pub mod stream_sweep;
pub mod target_auth;
pub mod target_lock;
