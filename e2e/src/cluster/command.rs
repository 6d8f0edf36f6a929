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
