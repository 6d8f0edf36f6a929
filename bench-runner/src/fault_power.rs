//! The power-loss half of the fault agent: the server container runs under msgbench-lazyfs,
//! which keeps written-but-not-fsynced data in memory and listens on a control socket in a
//! directory the agent shares (`runner_api::fault_agent::LAZYFS_CONTROL_SOCKET`). One line,
//! `power-loss`, makes it freeze the file system, discard that data, reply
//! `discarded_bytes=N`, SIGKILL the server it started and exit, so the container restarts on
//! what was synced. The socket is root's (0600): an agent that power-losses runs as uid 0.
//!
//! Errors say whether anything may have happened, in their status (`PowerLossError::status`):
//! before the request is written nothing was done (4xx; the operator records the fault as
//! refused, with the reason); once it is written the power may have been cut (5xx; unknown).
use crate::fault_process::{find_process, unix_ms};
use axum::http::StatusCode;
use runner_api::fault_agent::{
    FaultReport, FaultRequest, PowerLossDone, SignalSent, LAZYFS_CONTROL_SOCKET,
};
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;

/// How long the exchange may take. The wrapper replies once the freeze is done, which waits
/// for a file operation under way (a large fsync) to finish: seconds at worst, never forever.
pub const TIMEOUT: Duration = Duration::from_secs(5);

/// Longest reply read (the protocol's lines are short; a stray peer gets cut off).
const MAX_REPLY: u64 = 256;

/// Where the lazy file system listens, and how long to wait for it.
#[derive(Clone, Debug)]
pub struct LazyFsControl {
    pub socket: PathBuf,
    pub timeout: Duration,
}

impl Default for LazyFsControl {
    fn default() -> Self {
        Self {
            socket: LAZYFS_CONTROL_SOCKET.into(),
            timeout: TIMEOUT,
        }
    }
}

#[derive(Debug)]
pub enum PowerLossError {
    /// No socket: the server does not run under the lazy file system.
    NoSocket(PathBuf),
    /// A socket nobody listens on: the wrapper is not running (its container restarting).
    NotListening(PathBuf),
    /// Connecting failed otherwise (permission denied: the agent is not uid 0).
    Connect(PathBuf, io::Error),
    /// The connection was not accepted in time (the wrapper serves one client at a time).
    ConnectTimeout(PathBuf, Duration),
    /// The lazy file system answered `error=...`: it did nothing.
    Declined(String),
    /// Writing the request or reading the reply failed, after the request may have arrived.
    Exchange(PathBuf, io::Error),
    /// The reply is not `discarded_bytes=<u64>` (empty: the connection closed without one).
    BadReply(String),
    /// No reply in time.
    NoReply(PathBuf, Duration),
}

impl PowerLossError {
    /// 4xx: nothing was done. 5xx: the power may have been cut.
    pub fn status(&self) -> StatusCode {
        match self {
            Self::NoSocket(_) | Self::Declined(_) => StatusCode::UNPROCESSABLE_ENTITY,
            Self::NotListening(_) | Self::ConnectTimeout(..) => StatusCode::CONFLICT,
            Self::Connect(..) => StatusCode::INTERNAL_SERVER_ERROR,
            Self::Exchange(..) | Self::BadReply(_) => StatusCode::BAD_GATEWAY,
            Self::NoReply(..) => StatusCode::GATEWAY_TIMEOUT,
        }
    }
}

impl std::fmt::Display for PowerLossError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        const MAYBE: &str = "the power may have been cut";
        match self {
            Self::NoSocket(p) => write!(
                f,
                "no lazy file system control socket at {}: the server does not run under \
                 msgbench-lazyfs (spec.faultInjection.powerLoss is not set, or the server image \
                 lacks msgbench-lazyfs); nothing done",
                p.display()
            ),
            Self::NotListening(p) => write!(
                f,
                "the lazy file system's control socket {} refused the connection: \
                 msgbench-lazyfs is not running (the server container restarting?); nothing done",
                p.display()
            ),
            Self::Connect(p, e) if e.kind() == io::ErrorKind::PermissionDenied => write!(
                f,
                "connecting to {}: {e} (the socket is root's: the agent must run as uid 0 to \
                 cut the power); nothing done",
                p.display()
            ),
            Self::Connect(p, e) => write!(f, "connecting to {}: {e}; nothing done", p.display()),
            Self::ConnectTimeout(p, t) => write!(
                f,
                "the lazy file system's control socket {} did not accept a connection within \
                 {} ms; nothing done",
                p.display(),
                t.as_millis()
            ),
            Self::Declined(r) => write!(
                f,
                "the lazy file system declined power-loss ({r:?}); nothing done"
            ),
            Self::Exchange(p, e) => write!(f, "power-loss over {}: {e}; {MAYBE}", p.display()),
            Self::BadReply(r) if r.is_empty() => write!(
                f,
                "the lazy file system closed the connection without replying to power-loss; \
                 {MAYBE}"
            ),
            Self::BadReply(r) => write!(
                f,
                "the lazy file system replied {r:?} to power-loss, not discarded_bytes=<u64>; \
                 {MAYBE}"
            ),
            Self::NoReply(p, t) => write!(
                f,
                "no reply to power-loss from {} within {} ms; {MAYBE}",
                p.display(),
                t.as_millis()
            ),
        }
    }
}

impl std::error::Error for PowerLossError {}

/// `powerLoss` of the server process `process`: the lazy file system freezes, discards what
/// was not fsynced, and its wrapper SIGKILLs the server and exits. The report names the server
/// as killed (by the wrapper) and what was discarded.
pub async fn carry_out(
    ctl: &LazyFsControl,
    proc_root: &Path,
    process: &str,
    req: &FaultRequest,
) -> Result<FaultReport, (StatusCode, String)> {
    // The wrapper's child is the server (`msgbench-lazyfs ... -- nats-server ...`), so the
    // process it kills is the one a crash would signal, found the same way (the wrapper's
    // own name is not the server's). Found first: once the power is cut it is gone.
    let pid = find_process(proc_root, process).map_err(|e| (StatusCode::NOT_FOUND, e))?;
    let discarded_bytes = cut(ctl).await.map_err(|e| (e.status(), e.to_string()))?;
    // The reply comes once the file system is frozen: the power is off by now.
    let at = unix_ms();
    tracing::info!(key = %req.key, pid, process = %process, discarded_bytes, "power cut");
    Ok(FaultReport {
        key: req.key.clone(),
        action: req.action,
        signal: Some(SignalSent {
            signal: "SIGKILL".into(),
            process: process.into(),
            pid,
        }),
        partition: None,
        power_loss: Some(PowerLossDone { discarded_bytes }),
        at_unix_ms: at,
        until_unix_ms: None,
    })
}

/// Cuts the power: sends `power-loss` and returns the bytes the lazy file system discarded.
/// Connecting and the exchange share one deadline, `ctl.timeout`.
pub async fn cut(ctl: &LazyFsControl) -> Result<u64, PowerLossError> {
    let path = &ctl.socket;
    let deadline = tokio::time::Instant::now() + ctl.timeout;
    let conn = tokio::time::timeout_at(deadline, UnixStream::connect(path))
        .await
        .map_err(|_| PowerLossError::ConnectTimeout(path.clone(), ctl.timeout))?
        .map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => PowerLossError::NoSocket(path.clone()),
            io::ErrorKind::ConnectionRefused => PowerLossError::NotListening(path.clone()),
            _ => PowerLossError::Connect(path.clone(), e),
        })?;
    let reply = tokio::time::timeout_at(deadline, exchange(conn))
        .await
        .map_err(|_| PowerLossError::NoReply(path.clone(), ctl.timeout))?
        .map_err(|e| PowerLossError::Exchange(path.clone(), e))?;
    parse_reply(&reply)
}

/// Writes the request line, reads one reply line.
async fn exchange(mut conn: UnixStream) -> io::Result<String> {
    conn.write_all(b"power-loss\n").await?;
    conn.flush().await?;
    let mut reply = String::new();
    BufReader::new(conn.take(MAX_REPLY))
        .read_line(&mut reply)
        .await?;
    Ok(reply)
}

/// `discarded_bytes=N` (the wrapper's reply, `lazyfs/src/control.rs`) is N; `error=...` is the
/// lazy file system saying it did nothing; anything else is not understood.
pub fn parse_reply(line: &str) -> Result<u64, PowerLossError> {
    let line = line.trim_end_matches(['\n', '\r']);
    if line.starts_with("error=") {
        return Err(PowerLossError::Declined(line.into()));
    }
    (line.strip_prefix("discarded_bytes="))
        .and_then(|n| n.parse::<u64>().ok())
        .ok_or_else(|| PowerLossError::BadReply(line.into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_discarded_bytes_of_a_u64_is_understood() {
        assert_eq!(parse_reply("discarded_bytes=1234\n").unwrap(), 1234);
        assert_eq!(parse_reply("discarded_bytes=0").unwrap(), 0);
        for bad in [
            "",
            "discarded_bytes=",
            "discarded_bytes=-1",
            "discarded_bytes=12 ",
            "unsynced_bytes=12",
            "discarded_bytes=99999999999999999999",
        ] {
            let e = parse_reply(bad).unwrap_err();
            assert!(matches!(e, PowerLossError::BadReply(_)), "{bad:?}: {e:?}");
            assert_eq!(e.status(), StatusCode::BAD_GATEWAY, "{bad:?}");
        }
        let e = parse_reply("error=unknown command\n").unwrap_err();
        assert!(matches!(e, PowerLossError::Declined(_)), "{e:?}");
        assert!(e.status().is_client_error(), "nothing done: {e}");
    }

    #[tokio::test]
    async fn a_missing_socket_says_the_server_is_not_under_the_lazy_file_system() {
        let dir = tempfile::tempdir().unwrap();
        let ctl = LazyFsControl {
            socket: dir.path().join("absent/control.sock"),
            ..Default::default()
        };
        let e = cut(&ctl).await.unwrap_err();
        assert_eq!(e.status(), StatusCode::UNPROCESSABLE_ENTITY, "{e}");
        assert!(
            e.to_string().contains("spec.faultInjection.powerLoss"),
            "{e}"
        );
    }
}
