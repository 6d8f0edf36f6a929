//! `crdgen --write` regenerates the committed files derived from the types (CRD YAML, the CRD
//! reference page, Argo CD health scripts); `crdgen --check` fails when one is stale; no flag prints all CRDs to stdout
//! (for `kubectl apply -f -`).
#![forbid(unsafe_code)]
use std::process::ExitCode;

use msgbench_crdgen::generate::{all_crds, expected_files, render_plain, repo_root, stale_files};

fn main() -> ExitCode {
    let mode = std::env::args().nth(1);
    let result = match mode.as_deref() {
        None => print_all(),
        Some("--write") => write(),
        Some("--check") => check(),
        Some(other) => Err(format!(
            "unknown argument {other:?}; use --write, --check or nothing"
        )),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(msg) => {
            eprintln!("crdgen: {msg}");
            ExitCode::FAILURE
        }
    }
}

fn print_all() -> Result<(), String> {
    for crd in all_crds() {
        print!("{}", render_plain(&crd).map_err(|e| e.to_string())?);
    }
    Ok(())
}

fn write() -> Result<(), String> {
    let root = repo_root();
    for (path, content) in expected_files(&root).map_err(|e| e.to_string())? {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        if std::fs::read_to_string(&path).ok().as_deref() != Some(content.as_str()) {
            std::fs::write(&path, content).map_err(|e| format!("{}: {e}", path.display()))?;
            println!(
                "wrote {}",
                path.strip_prefix(&root).unwrap_or(&path).display()
            );
        }
    }
    Ok(())
}

fn check() -> Result<(), String> {
    let root = repo_root();
    let stale = stale_files(&root).map_err(|e| e.to_string())?;
    if stale.is_empty() {
        return Ok(());
    }
    let list: Vec<String> = stale
        .iter()
        .map(|p| p.strip_prefix(&root).unwrap_or(p).display().to_string())
        .collect();
    Err(format!(
        "committed generated files are stale, run `make crds`: {}",
        list.join(", ")
    ))
}
