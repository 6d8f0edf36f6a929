//! Cut one pod off from the API server and restore it (local cluster: pods are network
//! namespaces on this host). Packets are dropped, not refused, so the pod's requests hang the
//! way they do behind a broken network, and established connections go silent too.
use anyhow::{bail, ensure, Context, Result};
use std::process::Command;

/// A pod's network namespace with a DROP rule for the API server in it.
pub struct ApiPartition {
    netns: String,
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
        let netns = netns_of(pid, pod)?;
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
        let st = Command::new("ip")
            .args(["netns", "exec", &self.netns, "iptables", op])
            .args(&self.rule)
            .output()
            .context("ip netns exec iptables")?;
        if !st.status.success() {
            bail!(
                "iptables {op} {:?} in {}: {}",
                self.rule,
                self.netns,
                String::from_utf8_lossy(&st.stderr)
            );
        }
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

fn netns_of(pid: u32, pod: &str) -> Result<String> {
    let out = Command::new("ip")
        .args(["netns", "identify", &pid.to_string()])
        .output()
        .context("ip netns identify")?;
    let netns = String::from_utf8_lossy(&out.stdout).trim().to_string();
    ensure!(
        !netns.is_empty(),
        "pod {pod} (pid {pid}) is in no named network namespace"
    );
    Ok(netns)
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
    let netns = netns_of(pid, pod)?;
    let out = Command::new("ip")
        .args([
            "netns", "exec", &netns, "nft", "list", "table", "inet", table,
        ])
        .output()
        .context("ip netns exec nft")?;
    let err = String::from_utf8_lossy(&out.stderr);
    match out.status.success() {
        true => Ok(true),
        false if err.contains("No such file or directory") => Ok(false),
        false => bail!("nft list table inet {table} in {netns}: {err}"),
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
    bail!("no process on this host runs with {want:?} (is this the local cluster?)")
}
