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
        let out = Command::new("ip")
            .args(["netns", "identify", &pid.to_string()])
            .output()
            .context("ip netns identify")?;
        let netns = String::from_utf8_lossy(&out.stdout).trim().to_string();
        ensure!(
            !netns.is_empty(),
            "pod {pod} (pid {pid}) is in no named network namespace"
        );
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

fn pid_of_pod(pod: &str) -> Result<u32> {
    let want = format!("POD_NAME={pod}");
    for entry in std::fs::read_dir("/proc")?.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if environ(pid).is_ok_and(|env| env.contains(&want)) {
            return Ok(pid);
        }
    }
    bail!("no process on this host runs with {want} (is this the local cluster?)")
}
