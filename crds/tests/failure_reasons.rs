//! `RunFailureReason` is the one place a run's failure reasons are spelt: the operator and the
//! plugin name them only through it, the documentation's table lists exactly its values, and
//! the troubleshooting page has an entry for each. (The Argo CD script's list is generated from
//! it: `crdgen/tests/crd_yaml_fresh.rs`.)
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use msgbench_crds::RunFailureReason;

/// Source trees that set or read run failure reasons.
const SCANNED: &[&str] = &["operator-core/src", "operator/src", "cli/src"];

/// Literals spelt like a run reason that are someone else's word: (file, literal, whose). Each
/// must stay a single named constant, so it appears exactly once in its file.
const NOT_OURS: &[(&str, &str, &str)] = &[(
    "operator-core/src/run/runners/runner_failure.rs",
    "DeadlineExceeded",
    "Kubernetes' reason of a Job or pod past activeDeadlineSeconds",
)];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `file:line: "Reason"` for every quoted failure reason in the scanned sources, allowed
/// literals aside.
fn literal_reasons(root: &Path) -> Vec<String> {
    let mut files = Vec::new();
    for dir in SCANNED {
        rust_files(&root.join(dir), &mut files);
    }
    files.sort();
    let mut found = Vec::new();
    for path in files {
        let rel = path
            .strip_prefix(root)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        let text = std::fs::read_to_string(&path).expect("read source");
        for reason in RunFailureReason::ALL {
            let quoted = format!("\"{reason}\"");
            let allowed = NOT_OURS
                .iter()
                .any(|(file, literal, _)| *file == rel && *literal == reason.as_str());
            if allowed {
                continue;
            }
            for (i, line) in text.lines().enumerate() {
                if line.contains(&quoted) {
                    found.push(format!("{rel}:{}: {quoted}", i + 1));
                }
            }
        }
    }
    found
}

#[test]
fn operator_and_plugin_name_failure_reasons_only_through_the_enum() {
    let found = literal_reasons(&repo_root());
    assert!(
        found.is_empty(),
        "failure reasons spelt as string literals; use RunFailureReason::<Reason> \
         (as_str() where a &str is needed):\n{}",
        found.join("\n")
    );
}

#[test]
fn literals_that_are_not_ours_stay_one_named_constant() {
    let root = repo_root();
    for (file, literal, whose) in NOT_OURS {
        let text = std::fs::read_to_string(root.join(file)).expect("read source");
        let count = text.matches(&format!("\"{literal}\"")).count();
        assert_eq!(
            count, 1,
            "{file}: {literal:?} ({whose}) should be one constant"
        );
        assert!(
            literal.parse::<RunFailureReason>().is_ok(),
            "{literal:?} is no run reason: drop it from NOT_OURS"
        );
    }
}

/// First-column entries (backticks stripped) of every Markdown table whose header's first
/// cell is "failure reason", per table.
fn reason_tables(markdown: &str) -> Vec<Vec<String>> {
    let cells = |line: &str| -> Vec<String> {
        let inner = line.trim().trim_start_matches('|').trim_end_matches('|');
        inner.split('|').map(|c| c.trim().to_string()).collect()
    };
    let mut tables = Vec::new();
    let mut lines = markdown.lines().peekable();
    while let Some(line) = lines.next() {
        let is_header = line.trim_start().starts_with('|')
            && cells(line)[0].eq_ignore_ascii_case("failure reason");
        if !is_header {
            continue;
        }
        lines.next(); // the |---| separator
        let mut rows = Vec::new();
        while let Some(row) = lines.next_if(|l| l.trim_start().starts_with('|')) {
            rows.push(cells(row)[0].trim_matches('`').to_string());
        }
        tables.push(rows);
    }
    tables
}

/// Every Markdown file of the book (docs/src, recursively) and the README.
fn doc_files(root: &Path) -> Vec<PathBuf> {
    fn markdown(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.expect("directory entry").path();
            if path.is_dir() {
                markdown(&path, out);
            } else if path.extension().is_some_and(|e| e == "md") {
                out.push(path);
            }
        }
    }
    let mut docs = vec![root.join("README.md")];
    markdown(&root.join("docs/src"), &mut docs);
    docs.sort();
    docs
}

#[test]
fn the_docs_tables_list_exactly_the_failure_reasons() {
    let root = repo_root();
    let want: BTreeSet<String> = RunFailureReason::ALL
        .iter()
        .map(|r| r.to_string())
        .collect();
    let mut tables = 0;
    for path in doc_files(&root) {
        let text = std::fs::read_to_string(&path).expect("read doc");
        for rows in reason_tables(&text) {
            tables += 1;
            let doc = path.strip_prefix(&root).unwrap().display();
            let listed: BTreeSet<String> = rows.iter().cloned().collect();
            assert_eq!(
                listed.len(),
                rows.len(),
                "{doc}: a reason listed twice: {rows:?}"
            );
            let missing: Vec<_> = want.difference(&listed).collect();
            let unknown: Vec<_> = listed.difference(&want).collect();
            assert!(
                missing.is_empty() && unknown.is_empty(),
                "{doc}: failure reason table: missing {missing:?}, not a RunFailureReason {unknown:?}"
            );
        }
    }
    assert!(
        tables > 0,
        "no `| failure reason |` table in README.md or docs/src/"
    );
}

/// The troubleshooting page: one `## Reason` section per failure reason, each saying what it
/// means, what to check and how to fix it; no section for a reason that does not exist.
const TROUBLESHOOTING: &str = "docs/src/troubleshooting.md";

/// `## ` headings of `markdown`, with the text of the section under each.
fn sections(markdown: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for line in markdown.lines() {
        if let Some(heading) = line.strip_prefix("## ") {
            out.push((heading.trim().to_string(), String::new()));
        } else if let Some((_, body)) = out.last_mut() {
            body.push_str(line);
            body.push('\n');
        }
    }
    out
}

#[test]
fn every_failure_reason_has_a_troubleshooting_entry() {
    let text = std::fs::read_to_string(repo_root().join(TROUBLESHOOTING)).expect(TROUBLESHOOTING);
    let sections = sections(&text);
    let mut problems = Vec::new();
    for reason in RunFailureReason::ALL {
        match sections.iter().find(|(h, _)| h == reason.as_str()) {
            None => problems.push(format!("no `## {reason}` section")),
            Some((_, body)) => {
                for part in ["**Means:**", "**Check:**", "**Fix:**"] {
                    if !body.contains(part) {
                        problems.push(format!("`## {reason}` has no {part}"));
                    }
                }
            }
        }
    }
    for (heading, _) in &sections {
        if heading.parse::<RunFailureReason>().is_err() {
            problems.push(format!("`## {heading}` is no RunFailureReason"));
        }
    }
    assert!(
        problems.is_empty(),
        "{TROUBLESHOOTING}:\n{}",
        problems.join("\n")
    );
}

#[test]
fn a_reason_table_is_read_row_by_row() {
    let md = "text\n\n| Failure reason | when |\n|---|---|\n| `A` | x |\n| B | y |\n\nafter | z\n";
    assert_eq!(
        reason_tables(md),
        vec![vec!["A".to_string(), "B".to_string()]]
    );
    assert!(reason_tables("| reason | when |\n|---|---|\n| `A` | x |\n").is_empty());
}

/// The repository root: the parent of this crate's directory.
fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("crds/ has a parent")
        .to_path_buf()
}
