//! Configuration from the environment (the PubSubServer contract). Every bad value is an error
//! that names the variable and the rule, so a misconfigured pod fails fast and says why.
use std::time::Duration;

use crate::auth::Auth;
use crate::config_error::{ConfigError, Lookup};
use crate::tls::TlsFiles;

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EmitMode {
    /// Topic room and `__all__` are emitted on two tasks at once.
    Parallel,
    /// Topic room first, then `__all__`, on the publishing task.
    Sequential,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum WsMode {
    Echo,
    Broadcast,
}

/// When POST /publish answers 200.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum AckMode {
    /// After the message is committed to SQLite: an acknowledged message survives a crash
    /// of the process (default with a database file).
    Stored,
    /// After it is delivered and queued for the writer: a crash loses what was still queued
    /// (default with `:memory:`, where nothing survives a restart anyway).
    Queued,
}

#[derive(Debug, Clone)]
pub struct Config {
    pub port: u16,
    pub bind: String,
    pub emit_mode: EmitMode,
    pub database_file: String,
    pub cache_ttl: Duration,
    pub worker_threads: Option<usize>,
    pub ws_mode: WsMode,
    /// Per Socket.IO client outgoing packet buffer; when full, that client misses the message.
    pub socket_buffer: usize,
    /// Persistence queue between publishers and the SQLite writer; when full, records are dropped.
    pub persist_queue: usize,
    /// Newest messages (and consumptions) kept in SQLite; older rows are pruned.
    pub retain_messages: u64,
    /// Longest graceful shutdown before connections are cut.
    pub shutdown_grace: Duration,
    /// Client connections served at once; one more gets a 503 and is closed.
    pub max_connections: usize,
    /// Bytes the server may keep in memory: kept messages (with `:memory:`), the persistence
    /// queue and the REST cache, split by the `*_budget` methods.
    pub memory_budget: u64,
    pub publish_ack: AckMode,
    /// TLS_CERT_FILE and TLS_KEY_FILE: HTTPS and WSS on the one port.
    pub tls: Option<TlsFiles>,
    /// AUTH_TOKEN (with AUTH_HEADER, AUTH_QUERY): what a client must present; Debug redacts it.
    pub auth: Option<Auth>,
}

impl Config {
    /// Half the budget: messages kept in an in-memory database (a file keeps them on disk).
    pub fn message_budget(&self) -> Option<u64> {
        (self.database_file == ":memory:").then_some(self.memory_budget / 2)
    }

    /// A quarter: records waiting for the SQLite writer.
    pub fn queue_budget(&self) -> u64 {
        self.memory_budget / 4
    }

    /// A quarter: rendered REST pages.
    pub fn cache_budget(&self) -> u64 {
        self.memory_budget / 4
    }
}

/// Enough for benchmark fan-outs of a thousand-odd subscribers plus publishers, few enough that
/// idle connections (a few KiB each) cannot exhaust a 128Mi container.
/// 48 MiB. Measured with 1 MiB publishes and page reads: the process itself (~17 MiB), copies
/// of requests in flight and allocator fragmentation add ~35 MiB on top of what is budgeted,
/// so the server levels off below ~90 MiB, inside the 128Mi container the sample deploys.
pub const DEFAULT_MEMORY_BUDGET: u64 = 48 << 20;

pub const DEFAULT_MAX_CONNECTIONS: usize = 4096;

fn parse_num<T: std::str::FromStr + PartialOrd + Copy>(
    get: Lookup,
    var: &'static str,
    default: T,
    min: T,
    max: T,
    rule: &'static str,
) -> Result<T, ConfigError> {
    match get(var) {
        None => Ok(default),
        Some(raw) => match raw.trim().parse::<T>() {
            Ok(v) if v >= min && v <= max => Ok(v),
            _ => Err(ConfigError {
                var,
                value: raw,
                rule: rule.into(),
            }),
        },
    }
}

impl Config {
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(&|k| match std::env::var_os(k) {
            // A token that is set but empty or not UTF-8 must be refused (auth.rs), not read as
            // unset: that would serve without authentication.
            Some(v) if k == crate::auth::TOKEN_VAR => Some(v.to_string_lossy().into_owned()),
            v => v
                .and_then(|v| v.into_string().ok())
                .filter(|v| !v.is_empty()),
        })
    }

    pub fn from_lookup(get: Lookup) -> Result<Self, ConfigError> {
        let emit_default = if cfg!(feature = "sequential-emit") {
            EmitMode::Sequential
        } else {
            EmitMode::Parallel
        };
        let emit_mode = match get("EMIT_MODE").as_deref() {
            None => emit_default,
            Some("parallel") => EmitMode::Parallel,
            Some("sequential") => EmitMode::Sequential,
            Some(other) => {
                return Err(ConfigError {
                    var: "EMIT_MODE",
                    value: other.into(),
                    rule: "must be parallel or sequential".into(),
                })
            }
        };
        let ws_mode = match get("WS_MODE").as_deref() {
            None | Some("echo") => WsMode::Echo,
            Some("broadcast") => WsMode::Broadcast,
            Some(other) => {
                return Err(ConfigError {
                    var: "WS_MODE",
                    value: other.into(),
                    rule: "must be echo or broadcast".into(),
                })
            }
        };
        let worker_threads = match get("WORKER_THREADS") {
            None => None,
            Some(_) => Some(parse_num(
                get,
                "WORKER_THREADS",
                1usize,
                1,
                1024,
                "must be an integer from 1 to 1024",
            )?),
        };
        let database_file = get("DATABASE_FILE").unwrap_or_else(|| ":memory:".into());
        let publish_ack = match get("PUBLISH_ACK").as_deref() {
            None if database_file == ":memory:" => AckMode::Queued,
            None | Some("stored") => AckMode::Stored,
            Some("queued") => AckMode::Queued,
            Some(other) => {
                return Err(ConfigError {
                    var: "PUBLISH_ACK",
                    value: other.into(),
                    rule: "must be stored or queued".into(),
                })
            }
        };
        Ok(Config {
            port: parse_num(
                get,
                "PORT",
                8080u16,
                0,
                u16::MAX,
                "must be a port number 0-65535",
            )?,
            bind: get("BIND_ADDRESS").unwrap_or_else(|| "0.0.0.0".into()),
            emit_mode,
            database_file,
            cache_ttl: Duration::from_secs(parse_num(
                get,
                "CACHE_TTL_SECONDS",
                2u64,
                0,
                3600,
                "must be an integer number of seconds from 0 to 3600",
            )?),
            worker_threads,
            ws_mode,
            socket_buffer: parse_num(
                get,
                "SOCKET_BUFFER",
                8192usize,
                16,
                1 << 20,
                "must be an integer from 16 to 1048576 packets",
            )?,
            persist_queue: parse_num(
                get,
                "PERSIST_QUEUE",
                65536usize,
                1,
                1 << 24,
                "must be an integer from 1 to 16777216 records",
            )?,
            retain_messages: parse_num(
                get,
                "RETAIN_MESSAGES",
                100_000u64,
                1,
                1 << 32,
                "must be an integer from 1 to 4294967296",
            )?,
            shutdown_grace: Duration::from_secs(parse_num(
                get,
                "SHUTDOWN_GRACE_SECONDS",
                10u64,
                0,
                600,
                "must be an integer number of seconds from 0 to 600",
            )?),
            max_connections: parse_num(
                get,
                "MAX_CONNECTIONS",
                DEFAULT_MAX_CONNECTIONS,
                1,
                1 << 20,
                "must be an integer from 1 to 1048576",
            )?,
            memory_budget: parse_num(
                get,
                "MEMORY_BUDGET_BYTES",
                DEFAULT_MEMORY_BUDGET,
                16 << 20,
                1 << 40,
                "must be an integer number of bytes from 16777216 (16 MiB) to 2^40",
            )?,
            publish_ack,
            tls: crate::tls::files(get)?,
            auth: Auth::from_lookup(get)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn cfg(pairs: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let m: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Config::from_lookup(&move |k| m.get(k).cloned())
    }

    #[test]
    fn defaults_follow_the_contract() {
        let c = cfg(&[]).unwrap();
        assert_eq!(c.port, 8080);
        assert_eq!(c.database_file, ":memory:");
        assert_eq!(c.cache_ttl, Duration::from_secs(2));
        assert_eq!(c.ws_mode, WsMode::Echo);
        assert_eq!(c.worker_threads, None);
        assert_eq!(c.max_connections, DEFAULT_MAX_CONNECTIONS);
        assert_eq!(c.memory_budget, 48 << 20);
        assert_eq!(c.message_budget(), Some(24 << 20));
        assert_eq!(
            c.publish_ack,
            AckMode::Queued,
            "nothing to store durably in :memory:"
        );
        let file = cfg(&[("DATABASE_FILE", "/data/p.db")]).unwrap();
        assert_eq!(file.publish_ack, AckMode::Stored);
        assert_eq!(file.message_budget(), None, "a file keeps messages on disk");
        let expected = if cfg!(feature = "sequential-emit") {
            EmitMode::Sequential
        } else {
            EmitMode::Parallel
        };
        assert_eq!(c.emit_mode, expected);
    }

    #[test]
    fn env_overrides_and_bad_values_name_the_variable() {
        let c = cfg(&[
            ("EMIT_MODE", "sequential"),
            ("WS_MODE", "broadcast"),
            ("WORKER_THREADS", "3"),
        ])
        .unwrap();
        assert_eq!(c.emit_mode, EmitMode::Sequential);
        assert_eq!(c.ws_mode, WsMode::Broadcast);
        assert_eq!(c.worker_threads, Some(3));
        for (var, val) in [
            ("EMIT_MODE", "fast"),
            ("WS_MODE", "fanout"),
            ("PORT", "70000"),
            ("WORKER_THREADS", "0"),
            ("CACHE_TTL_SECONDS", "-1"),
            ("MAX_CONNECTIONS", "0"),
            ("MEMORY_BUDGET_BYTES", "1000"),
            ("PUBLISH_ACK", "never"),
        ] {
            let err = cfg(&[(var, val)]).unwrap_err().to_string();
            assert!(err.starts_with(var), "{err}");
            assert!(err.contains("must be"), "{err}");
        }
    }
}
