//! Running a program on this host and reading what it printed, the same way for every probe.
use anyhow::{ensure, Context, Result};
use std::process::Command;

/// Runs `cmd` to its end; its standard output, or an error with what it wrote to stderr.
pub fn stdout_of(mut cmd: Command) -> Result<String> {
    let line = argv(&cmd).join(" ");
    let out = cmd.output().with_context(|| format!("running {line}"))?;
    ensure!(
        out.status.success(),
        "{line}: {}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr).trim()
    );
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The variables `cargo test` sets for the test process (its own package's manifest dir,
/// name, version, binaries). A `cargo build` started from a test must not inherit them: ring's
/// build script reruns when `CARGO_MANIFEST_DIR` changes, so a nested build rebuilt ring and
/// everything above it (rustls, kube, the operator, the runner: ~7 min), and the next build
/// outside the test rebuilt them back.
fn cargo_test_vars() -> Vec<String> {
    std::env::vars_os()
        .filter_map(|(k, _)| k.into_string().ok())
        .filter(|k| is_cargo_test_var(k))
        .collect()
}

fn is_cargo_test_var(name: &str) -> bool {
    const EXACT: [&str; 7] = [
        "CARGO_MANIFEST_DIR",
        "CARGO_MANIFEST_PATH",
        "CARGO_CRATE_NAME",
        "CARGO_BIN_NAME",
        "CARGO_PRIMARY_PACKAGE",
        "CARGO_TARGET_TMPDIR",
        "OUT_DIR",
    ];
    EXACT.contains(&name) || name.starts_with("CARGO_PKG_") || name.starts_with("CARGO_BIN_EXE_")
}

/// `cmd` without [`cargo_test_vars`], for anything that may run cargo.
pub fn without_cargo_test_vars(cmd: &mut Command) -> &mut Command {
    for k in cargo_test_vars() {
        cmd.env_remove(k);
    }
    cmd
}

/// The program and its arguments, as a shell would show them (without quoting).
pub fn argv(cmd: &Command) -> Vec<String> {
    std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(|a| a.to_string_lossy().into_owned())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_variables_cargo_sets_for_a_test_are_dropped() {
        for var in [
            "CARGO_MANIFEST_DIR",
            "CARGO_PKG_VERSION",
            "CARGO_BIN_EXE_e2e",
            "OUT_DIR",
        ] {
            assert!(is_cargo_test_var(var), "{var}");
        }
        for var in [
            "CARGO_TARGET_DIR",
            "CARGO_HOME",
            "CARGO_INCREMENTAL",
            "PATH",
            "CARGO",
        ] {
            assert!(!is_cargo_test_var(var), "{var}");
        }
        // This very process runs under `cargo test`.
        assert!(cargo_test_vars().contains(&"CARGO_MANIFEST_DIR".to_string()));
    }

    #[test]
    fn a_failing_program_is_an_error_naming_it_and_its_stderr() {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo out; echo oops >&2; exit 3"]);
        let e = format!("{:#}", stdout_of(cmd).unwrap_err());
        assert!(e.contains("sh -c") && e.contains("oops"), "{e}");
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo out"]);
        assert_eq!(stdout_of(cmd).unwrap(), "out\n");
    }
}
