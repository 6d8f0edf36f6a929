//! Cut one pod off from the API server and restore it. Packets are dropped, not refused, so the
//! pod's requests hang the way they do behind a broken network, and established connections go
//! silent too. A pod is found by its processes in this host's /proc, which shows every pod's
//! processes on both flavours (kind's node PID namespaces are nested in the host's), and its
//! network namespace is entered with this host's own iptables and nft ([`PodNetns`]).
use crate::cluster::command;
use anyhow::{bail, Context, Result};
use std::fs::File;
use std::os::fd::AsRawFd;
use std::process::Command;

/// A pod's network namespace with a DROP rule for the API server in it.
pub struct ApiPartition {
    netns: PodNetns,
    rule: Vec<String>,
}

impl ApiPartition {
    /// Blocks the API server for the process whose environment says `POD_NAME=<pod>`.
    pub fn block(pod: &str) -> Result<Self> {
        let pid = pid_of_pod(pod)?;
        let env = environ(pid)?;
        let get = |k: &str| {
            env.iter()
                .find_map(|kv| kv.strip_prefix(&format!("{k}=")))
                .map(str::to_string)
                .with_context(|| format!("{k} not in the environment of {pod} (pid {pid})"))
        };
        let (host, port) = (
            get("KUBERNETES_SERVICE_HOST")?,
            get("KUBERNETES_SERVICE_PORT")?,
        );
        let netns = PodNetns::of(pid, pod)?;
        let rule: Vec<String> = [
            "OUTPUT", "-p", "tcp", "-d", &host, "--dport", &port, "-j", "DROP",
        ]
        .map(String::from)
        .to_vec();
        let p = ApiPartition { netns, rule };
        p.iptables("-I")?;
        Ok(p)
    }

    /// Lifts the block (idempotent: a missing rule is not an error).
    pub fn lift(&self) -> Result<()> {
        while self.iptables("-C").is_ok() {
            self.iptables("-D")?;
        }
        Ok(())
    }

    fn iptables(&self, op: &str) -> Result<()> {
        let mut cmd = self.netns.command("iptables");
        cmd.arg(op).args(&self.rule);
        command::stdout_of(cmd)
            .with_context(|| format!("iptables in the network namespace of {}", self.netns.pod))?;
        Ok(())
    }
}

impl Drop for ApiPartition {
    fn drop(&mut self) {
        let _ = self.lift();
    }
}

fn environ(pid: u32) -> Result<Vec<String>> {
    let raw = std::fs::read(format!("/proc/{pid}/environ"))?;
    Ok(raw
        .split(|b| *b == 0)
        .map(|kv| String::from_utf8_lossy(kv).into_owned())
        .collect())
}

/// A pod's network namespace, held open, entered with `nsenter --net` and this host's tools.
///
/// Held, not named: kind's pod namespaces are named only inside their node's mount namespace
/// (this host's `ip netns` does not see them), and a pid is no handle either, since the process
/// it was found by may exit while the rule is in place (a partitioned operator steps down by
/// exiting; its container restarts in the same pod namespace). The open file keeps naming that
/// namespace on both flavours, with no node, runtime or container id to ask.
struct PodNetns {
    file: File,
    pod: String,
}

impl PodNetns {
    fn of(pid: u32, pod: &str) -> Result<Self> {
        let path = format!("/proc/{pid}/ns/net");
        let file = File::open(&path)
            .with_context(|| format!("opening {path}, the network namespace of {pod}"))?;
        Ok(PodNetns {
            file,
            pod: pod.into(),
        })
    }

    /// `program` run in the namespace: nsenter opens it through this process's descriptor.
    fn command(&self, program: &str) -> Command {
        nsenter_net(std::process::id(), self.file.as_raw_fd(), program)
    }
}

fn nsenter_net(holder: u32, fd: i32, program: &str) -> Command {
    let mut cmd = Command::new("nsenter");
    cmd.arg(format!("--net=/proc/{holder}/fd/{fd}"))
        .arg(program);
    cmd
}

/// Whether nftables table `inet <table>` is in the network namespace of the nats-server of
/// `pod` in namespace `ns` (found by its `SERVER_NAME` and `CLUSTER_ADVERTISE`), as the host's
/// own `nft` lists it: what a pod's fault agent applied, seen from outside the pod.
pub fn nft_table_in_server_pod(pod: &str, ns: &str, table: &str) -> Result<bool> {
    let pid = pid_with(&[
        format!("SERVER_NAME={pod}"),
        format!("CLUSTER_ADVERTISE={pod}."),
        format!(".{ns}.svc:"),
    ])?;
    let netns = PodNetns::of(pid, pod)?;
    let out = (netns.command("nft"))
        .args(["list", "table", "inet", table])
        .output()
        .context("nsenter nft")?;
    let err = String::from_utf8_lossy(&out.stderr);
    match out.status.success() {
        true => Ok(true),
        false if err.contains("No such file or directory") => Ok(false),
        false => bail!("nft list table inet {table} in the network namespace of {pod}: {err}"),
    }
}

fn pid_of_pod(pod: &str) -> Result<u32> {
    pid_with(&[format!("POD_NAME={pod}")])
}

/// The process whose environment has, for each of `want`, a variable containing it.
fn pid_with(want: &[String]) -> Result<u32> {
    for entry in std::fs::read_dir("/proc")?.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let has = |env: &Vec<String>| want.iter().all(|w| env.iter().any(|kv| kv.contains(w)));
        if environ(pid).is_ok_and(|env| has(&env)) {
            return Ok(pid);
        }
    }
    bail!("no process on this host runs with {want:?} (is the cluster on this machine?)")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::command::argv;

    #[test]
    fn the_namespace_is_entered_through_the_holders_descriptor() {
        let cmd = nsenter_net(4242, 7, "iptables");
        assert_eq!(argv(&cmd), ["nsenter", "--net=/proc/4242/fd/7", "iptables"]);
    }

    #[test]
    fn a_held_namespace_stays_enterable_by_its_descriptor() {
        let netns = PodNetns::of(std::process::id(), "self").unwrap();
        let path = format!("/proc/{}/fd/{}", std::process::id(), netns.file.as_raw_fd());
        let held = std::fs::read_link(&path).unwrap();
        let own = std::fs::read_link("/proc/self/ns/net").unwrap();
        assert_eq!(held, own, "{path} names this process's network namespace");
        assert!(PodNetns::of(u32::MAX, "gone").is_err());
    }
}
