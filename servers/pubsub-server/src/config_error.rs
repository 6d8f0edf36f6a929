//! What every part of the configuration reads the environment through, and how it says no.
//! Its own module because `config` assembles `auth` and `tls`, which read with these too.
use std::borrow::Cow;

#[derive(Debug, thiserror::Error)]
#[error("{var}={value:?}: {rule}")]
pub struct ConfigError {
    pub var: &'static str,
    pub value: String,
    pub rule: Cow<'static, str>,
}

/// An environment variable's value by name (`std::env::var` in the server, a map in tests).
pub type Lookup<'a> = &'a dyn Fn(&str) -> Option<String>;
