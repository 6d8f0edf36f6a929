//! The network half of the fault agent: a `partition` is one nftables table in the pod's own
//! network namespace (every container of a pod shares it), added and later deleted by `nft`.
//! Nothing on the node is touched.
//!
//! The table drops every TCP packet whose source or destination port is one of the server's
//! chosen ports, in both directions, at a priority before connection tracking (-310: before
//! conntrack at -200 and raw at -300). There is no "established" exception, so connections
//! that were open go silent too, as behind a broken network; nothing is refused or reset, so
//! both sides find out only by their own timeouts.
use std::path::PathBuf;
use std::process::Stdio;
use tokio::io::AsyncWriteExt;

/// The table the agent owns; nothing else in the pod uses this name.
pub const TABLE: &str = "msgbench_fault";

/// The ruleset for `ports`, as `nft -f` reads it. It starts by deleting any table of the same
/// name (declared first, so the delete never fails), so applying is atomic and replaces a
/// leftover instead of adding to it.
pub fn ruleset(ports: &[u16]) -> String {
    let set = ports
        .iter()
        .map(u16::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    let chain = |name: &str| {
        format!(
            "  chain {name} {{\n    type filter hook {name} priority -310; policy accept;\n    \
             tcp dport {{ {set} }} drop\n    tcp sport {{ {set} }} drop\n  }}\n"
        )
    };
    format!(
        "table inet {TABLE}\ndelete table inet {TABLE}\ntable inet {TABLE} {{\n{}{}}}\n",
        chain("input"),
        chain("output")
    )
}

/// The `nft` program (in the bench-runner image: `/usr/sbin/nft`).
#[derive(Clone, Debug)]
pub struct Nft {
    pub program: PathBuf,
}

impl Nft {
    /// Applies `rules` in one transaction.
    pub async fn apply(&self, rules: &str) -> Result<(), String> {
        let mut child = tokio::process::Command::new(&self.program)
            .args(["-f", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("{}: {e}", self.program.display()))?;
        if let Some(mut stdin) = child.stdin.take() {
            stdin
                .write_all(rules.as_bytes())
                .await
                .map_err(|e| format!("writing the rules to nft: {e}"))?;
        }
        let out = child.wait_with_output().await.map_err(|e| e.to_string())?;
        match out.status.success() {
            true => Ok(()),
            false => Err(format!(
                "nft -f: {} ({})",
                String::from_utf8_lossy(&out.stderr).trim(),
                out.status
            )),
        }
    }

    /// Whether the agent's table is in place now.
    pub async fn present(&self) -> Result<bool, String> {
        let out = tokio::process::Command::new(&self.program)
            .args(["list", "table", "inet", TABLE])
            .stdin(Stdio::null())
            .output()
            .await
            .map_err(|e| format!("{}: {e}", self.program.display()))?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        match out.status.success() {
            true => Ok(true),
            false if stderr.contains("No such file or directory") => Ok(false),
            false => Err(format!("nft list table: {}", stderr.trim())),
        }
    }

    /// Removes the agent's table. `Ok(false)`: there was none.
    pub async fn remove(&self) -> Result<bool, String> {
        let out = tokio::process::Command::new(&self.program)
            .args(["delete", "table", "inet", TABLE])
            .stdin(Stdio::null())
            .output()
            .await
            .map_err(|e| format!("{}: {e}", self.program.display()))?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        match out.status.success() {
            true => Ok(true),
            false if stderr.contains("No such file or directory") => Ok(false),
            false => Err(format!("nft delete table: {}", stderr.trim())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ruleset_drops_both_directions_on_every_port_before_conntrack() {
        let r = ruleset(&[6222, 4222]);
        assert!(r.starts_with("table inet msgbench_fault\ndelete table inet msgbench_fault\n"));
        for hook in ["input", "output"] {
            assert!(
                r.contains(&format!(
                    "type filter hook {hook} priority -310; policy accept;"
                )),
                "{r}"
            );
        }
        assert_eq!(r.matches("tcp dport { 6222, 4222 } drop").count(), 2, "{r}");
        assert_eq!(r.matches("tcp sport { 6222, 4222 } drop").count(), 2, "{r}");
        assert!(
            !r.contains("ct state"),
            "established connections are not spared: {r}"
        );
    }
}
