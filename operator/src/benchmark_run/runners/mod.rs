//! The runners as the operator reaches them: their control endpoint (`runner_http`), their
//! records gathered once they are done (`gather`) and the run's children deleted (`children`).
pub mod children;
pub mod gather;
pub mod runner_http;
