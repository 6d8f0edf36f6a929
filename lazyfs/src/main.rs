//! `msgbench-lazyfs --backing DIR --mount DIR --control SOCKET [--uid U --gid G] -- CMD ARGS...`
//! See the library's header for what it does and what a pod must grant it.
#![forbid(unsafe_code)]

use std::ffi::OsString;
use std::path::PathBuf;

use clap::Parser;
use msgbench_lazyfs::wrapper::{run, Options};

/// Runs CMD on a lazy FUSE mount of DIR whose unsynced writes a `power-loss` on the
/// control socket throws away.
#[derive(Debug, Parser)]
#[command(name = "msgbench-lazyfs", version)]
struct Args {
    /// Directory that holds the data that survives (the "disk").
    #[arg(long)]
    backing: PathBuf,
    /// Where CMD sees the file system.
    #[arg(long)]
    mount: PathBuf,
    /// Unix socket for `status` and `power-loss`.
    #[arg(long)]
    control: PathBuf,
    /// Run CMD as this uid (the wrapper itself stays root to serve the mount).
    #[arg(long)]
    uid: Option<u32>,
    /// Run CMD as this gid.
    #[arg(long)]
    gid: Option<u32>,
    /// The command and its arguments, after `--`.
    #[arg(last = true, required = true)]
    command: Vec<OsString>,
}

fn main() {
    let a = Args::parse();
    let opts = Options {
        backing: a.backing,
        mount: a.mount,
        control: a.control,
        uid: a.uid,
        gid: a.gid,
        command: a.command,
    };
    match run(opts) {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            let said = format!("msgbench-lazyfs: {e:#}");
            eprintln!("{said}");
            // The kubelet keeps this file's text as the container's last termination message,
            // which the operator quotes beside a crash loop (a node without /dev/fuse, say).
            let _ = std::fs::write("/dev/termination-log", &said);
            std::process::exit(125);
        }
    }
}
