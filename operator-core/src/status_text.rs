//! Plain text for status: every human-readable string the operator writes into a status
//! (condition messages, verdict messages) goes through [`plain`]. Runner logs and termination
//! messages carry ANSI colour codes (`ESC[2m…`) and newlines, which `kubectl describe` and GitOps
//! UIs would otherwise show raw.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use msgbench_crds::conditions::{self, ConditionUpdate};

/// Sets a condition with its message made [`plain`]: the one way the operator writes a
/// condition (the setter and its transition-time rule are `msgbench_crds::conditions`).
pub fn set_condition(
    conditions: &mut Vec<Condition>,
    mut update: ConditionUpdate,
    observed_generation: Option<i64>,
    now: &Time,
) {
    update.message = plain(&update.message);
    conditions::set(conditions, update, observed_generation, now);
}

/// Longest status message, in bytes. The Condition schema allows 32 KiB; a message is a summary,
/// so stay far below.
pub const MAX_MESSAGE_BYTES: usize = 1024;

/// Shown where lines were joined.
const LINE_BREAK: &str = " | ";
/// Ends a truncated message.
const ELLIPSIS: char = '…';

/// `text` as one plain line of at most [`MAX_MESSAGE_BYTES`] bytes.
pub fn plain(text: &str) -> String {
    plain_bounded(text, MAX_MESSAGE_BYTES)
}

/// `text` as one plain line of at most `max_bytes` bytes: ANSI escape sequences (CSI, OSC, …)
/// removed, line breaks joined with ` | `, tabs and runs of spaces made one space, every other
/// control character (C0, DEL, C1) and bidirectional override dropped, ends trimmed. Escapes are
/// removed before the cut, so a sequence straddling the bound never leaves a fragment; the cut
/// falls on a character boundary and ends with `…`.
pub fn plain_bounded(text: &str, max_bytes: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max_bytes + 4));
    let mut gap = Gap::None;
    // anstream's VT parser removes 7-bit escape sequences, also an unterminated one at the end
    // (a message cut upstream); it keeps whitespace controls, handled below.
    'pieces: for piece in anstream::adapter::strip_str(text) {
        let mut chars = piece.chars();
        while let Some(c) = chars.next() {
            match c {
                '\n' | '\r' | '\u{0b}' | '\u{0c}' | '\u{85}' | '\u{2028}' | '\u{2029}' => {
                    gap = Gap::Line
                }
                ' ' | '\t' => gap = gap.max(Gap::Space),
                // The 8-bit CSI: skip its parameters up to the final byte.
                '\u{9b}' => {
                    for c in chars.by_ref() {
                        if ('\u{40}'..='\u{7e}').contains(&c) {
                            break;
                        }
                    }
                }
                c if c.is_control() || is_bidi_control(c) => {}
                c => {
                    if !out.is_empty() {
                        match gap {
                            Gap::Line => out.push_str(LINE_BREAK),
                            Gap::Space => out.push(' '),
                            Gap::None => {}
                        }
                    }
                    gap = Gap::None;
                    out.push(c);
                    if out.len() > max_bytes {
                        break 'pieces;
                    }
                }
            }
        }
    }
    truncate(out, max_bytes)
}

/// What separates the next visible character from the previous one.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Gap {
    None,
    Space,
    Line,
}

/// Bidirectional embeddings, overrides and isolates: they reorder what a reader sees.
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

fn truncate(mut s: String, max_bytes: usize) -> String {
    if s.len() <= max_bytes {
        return s;
    }
    // No room for the ellipsis in a tiny bound: cut only.
    let ellipsis = (max_bytes >= ELLIPSIS.len_utf8()).then_some(ELLIPSIS);
    let mut cut = max_bytes - ellipsis.map_or(0, char::len_utf8);
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    s.truncate(cut);
    let kept = s.trim_end().len();
    s.truncate(kept);
    s.extend(ellipsis);
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_is_unchanged() {
        let t = "3 of 3 runners reached the start barrier within 90s (barrierTimeoutSeconds)";
        assert_eq!(plain(t), t);
        assert_eq!(plain(""), "");
    }

    #[test]
    fn a_coloured_tracing_line_becomes_plain() {
        // What tracing-subscriber's fmt layer prints to a terminal, as copied from a runner log.
        let line = "\u{1b}[2m2025-06-01T10:00:00.123456Z\u{1b}[0m \u{1b}[31mERROR\u{1b}[0m \
                    \u{1b}[2mbench_runner::agent\u{1b}[0m\u{1b}[2m:\u{1b}[0m start barrier timed \
                    out \u{1b}[3mwaited_s\u{1b}[0m\u{1b}[2m=\u{1b}[0m60";
        assert_eq!(
            plain(line),
            "2025-06-01T10:00:00.123456Z ERROR bench_runner::agent: start barrier timed out waited_s=60"
        );
    }

    #[test]
    fn lines_are_joined_and_whitespace_collapsed() {
        let t = "exit code 1 (Error):\n\tError: connecting\r\n\r\n  Caused by: refused  \n";
        assert_eq!(
            plain(t),
            "exit code 1 (Error): | Error: connecting | Caused by: refused"
        );
    }

    #[test]
    fn other_escapes_and_controls_are_dropped() {
        // OSC 8 hyperlink, a cursor move, bell, NUL, DEL, an 8-bit CSI, a bidi override.
        let t = "\u{1b}]8;;http://x/\u{7}link\u{1b}]8;;\u{7} \u{1b}[2Aup\u{7}\u{0}\u{7f} \
                 \u{9b}1mbold \u{202e}txet";
        assert_eq!(plain(t), "link up bold txet");
    }

    #[test]
    fn an_escape_cut_off_upstream_leaves_nothing() {
        assert_eq!(
            plain("runner failed: connection reset \u{1b}[3"),
            "runner failed: connection reset"
        );
        assert_eq!(plain("\u{1b}"), "");
    }

    #[test]
    fn an_escape_across_the_bound_leaves_no_fragment() {
        // The CSI starts 2 bytes before the bound: removed first, so the cut sees plain text.
        let t = format!("{}\u{1b}[31mXYZ\u{1b}[0m tail", "a".repeat(1022));
        let p = plain(&t);
        assert!(p.len() <= MAX_MESSAGE_BYTES, "{}", p.len());
        assert!(
            !p.contains('\u{1b}') && !p.contains("[31") && !p.contains('['),
            "{p}"
        );
        assert!(p.ends_with('…'));
        // Exactly at the bound: nothing cut.
        let t = format!("{}\u{1b}[31m{}\u{1b}[0m", "a".repeat(1000), "b".repeat(24));
        assert_eq!(plain(&t), format!("{}{}", "a".repeat(1000), "b".repeat(24)));
    }

    #[test]
    fn multibyte_text_is_cut_on_a_character_boundary() {
        let t = "é".repeat(600); // 1200 bytes
        let p = plain(&t);
        assert!(p.len() <= MAX_MESSAGE_BYTES);
        assert!(p.ends_with('…'));
        assert!(p.trim_end_matches('…').chars().all(|c| c == 'é'));
        // 4-byte characters at a small bound: 2 fit before the ellipsis (8 + 3 <= 12).
        assert_eq!(plain_bounded("🦀🦀🦀🦀", 12), "🦀🦀…");
        assert_eq!(plain_bounded("🦀🦀🦀🦀", 10), "🦀…");
        assert_eq!(plain_bounded("🦀🦀🦀", 12), "🦀🦀🦀");
        assert_eq!(plain_bounded("abc", 2), "ab");
    }

    #[test]
    fn plain_is_idempotent() {
        let t = format!("{}\n\u{1b}[1mbold\u{1b}[0m\tx", "ü".repeat(700));
        let once = plain(&t);
        assert_eq!(plain(&once), once);
    }
}
