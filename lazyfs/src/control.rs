//! The control socket's one-line protocol: one request line, one reply line.
//!
//! - `status` → `unsynced_bytes=N`
//! - `power-loss` → `discarded_bytes=N`, then the wrapper kills its child and exits
//! - anything else → `error=unknown command`

use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};

use crate::fs::Control;

#[derive(Debug, PartialEq, Eq)]
pub enum Request {
    Status,
    PowerLoss,
}

pub fn parse(line: &str) -> Option<Request> {
    match line.trim() {
        "status" => Some(Request::Status),
        "power-loss" => Some(Request::PowerLoss),
        _ => None,
    }
}

/// Longest request line read: the protocol's words are short, a stray peer gets cut off.
const MAX_LINE: u64 = 256;

/// Serves connections one at a time, for good. After a power loss it replies, then calls
/// `after_power_loss`, which must not return (it kills the child and exits the process).
pub fn serve(listener: UnixListener, control: Control, after_power_loss: impl Fn()) {
    for conn in listener.incoming() {
        let Ok(mut conn) = conn else { continue };
        let Ok(line) = read_line(&conn) else { continue };
        let reply = match parse(&line) {
            Some(Request::Status) => format!("unsynced_bytes={}\n", control.unsynced_bytes()),
            Some(Request::PowerLoss) => {
                let dropped = control.power_loss();
                // The file system is frozen already: a lost reply loses no durability.
                let _ = conn.write_all(format!("discarded_bytes={dropped}\n").as_bytes());
                let _ = conn.flush();
                after_power_loss();
                unreachable!("after_power_loss returned");
            }
            None => "error=unknown command\n".to_string(),
        };
        let _ = conn.write_all(reply.as_bytes());
    }
}

fn read_line(conn: &UnixStream) -> io::Result<String> {
    let mut line = String::new();
    BufReader::new(conn.take(MAX_LINE)).read_line(&mut line)?;
    Ok(line)
}

/// A client: sends `request`, returns the reply line without its newline.
pub fn ask(socket: &std::path::Path, request: &str) -> io::Result<String> {
    let mut conn = UnixStream::connect(socket)?;
    conn.set_read_timeout(Some(std::time::Duration::from_secs(30)))?;
    conn.write_all(format!("{request}\n").as_bytes())?;
    let mut reply = String::new();
    BufReader::new(conn).read_line(&mut reply)?;
    Ok(reply.trim_end().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_whole_words() {
        assert_eq!(parse("status\n"), Some(Request::Status));
        assert_eq!(parse(" power-loss \r\n"), Some(Request::PowerLoss));
        assert_eq!(parse("power"), None);
        assert_eq!(parse("status now"), None);
        assert_eq!(parse(""), None);
    }
}
