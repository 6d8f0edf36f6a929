//! Result records in the container log, framed so that transit damage is detected.
//!
//! The log is the fallback path (the operator normally fetches results over the agent's control
//! endpoint). Container runtimes split log lines at 16 KiB into partial entries, and a line of
//! another stream can land between two parts; one such 16–24 KB record once cost a whole run.
//! So each record goes out as frames of at most [`FRAME_DATA_BYTES`] bytes, each a line of its
//! own: `MSGBENCH-FRAME v2 <runner> <trial> <part>/<parts> <sha256 of the whole record> <data>`.
//! Reassembly joins the parts of a trial in order and checks the digest: a record is either
//! read exactly as written or reported as damaged, never silently misread.
use crate::agent::{RawResultLine, ResultLine};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;

/// Marks a frame line (it may follow other text on a damaged line).
pub const FRAME_PREFIX: &str = "MSGBENCH-FRAME ";
/// Version of the frame layout.
pub const FRAME_VERSION: &str = "v2";
/// Payload bytes per frame: well under the runtimes' 16 KiB split with room for the header.
pub const FRAME_DATA_BYTES: usize = 8 * 1024;
/// Most frames of one record, checked on each frame before anything is gathered for it.
pub const MAX_PARTS: usize = 4096;
/// Largest record written or read (compact JSON): [`MAX_PARTS`] full frames, 32 MiB, far
/// above a real record (a day of timeline and 100 stages stay under a few MiB), so a log
/// cannot make the reader join more than this for one record.
pub const MAX_RECORD_BYTES: usize = MAX_PARTS * FRAME_DATA_BYTES;
/// Missing frame numbers named in a damage report (the rest are counted).
const MISSING_NAMED: usize = 8;

fn digest(record: &str) -> String {
    let d = Sha256::digest(record.as_bytes());
    d.iter().take(16).map(|b| format!("{b:02x}")).collect()
}

/// Splits `s` into pieces of at most `max` bytes, never inside a UTF-8 character.
fn split_at_chars(s: &str, max: usize) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = s;
    while !rest.is_empty() {
        let mut cut = rest.len().min(max);
        while !rest.is_char_boundary(cut) {
            cut -= 1;
        }
        let (head, tail) = rest.split_at(cut);
        out.push(head);
        rest = tail;
    }
    out
}

/// The frame lines of one result record (without trailing newlines).
pub fn frames(line: &ResultLine) -> serde_json::Result<Vec<String>> {
    // Compact JSON never contains a raw newline, so every frame stays one log line.
    let record = serde_json::to_string(line)?;
    if record.len() > MAX_RECORD_BYTES {
        return Err(serde::ser::Error::custom(format!(
            "result record of {} bytes, more than the {MAX_RECORD_BYTES} the log frames carry",
            record.len()
        )));
    }
    let sum = digest(&record);
    let parts = split_at_chars(&record, FRAME_DATA_BYTES);
    let n = parts.len();
    Ok(parts
        .into_iter()
        .enumerate()
        .map(|(i, data)| {
            format!(
                "{FRAME_PREFIX}{FRAME_VERSION} {} {} {}/{n} {sum} {data}",
                line.runner_id,
                line.trial,
                i + 1
            )
        })
        .collect())
}

/// One frame as read back.
#[derive(Debug, PartialEq)]
struct Frame<'a> {
    runner: u16,
    trial: u32,
    part: usize,
    parts: usize,
    sum: &'a str,
    data: &'a str,
}

fn parse_frame(line: &str) -> Option<Frame<'_>> {
    let at = line.find(FRAME_PREFIX)?;
    let rest = line[at + FRAME_PREFIX.len()..].trim_end_matches(['\r', '\n']);
    let mut it = rest.splitn(6, ' ');
    if it.next()? != FRAME_VERSION {
        return None;
    }
    let runner = it.next()?.parse().ok()?;
    let trial = it.next()?.parse().ok()?;
    let (part, parts) = it.next()?.split_once('/')?;
    let (part, parts) = (part.parse().ok()?, parts.parse().ok()?);
    let sum = it.next()?;
    let data = it.next().unwrap_or("");
    // Nothing the writer would not write: bounds every record at MAX_RECORD_BYTES.
    let fits = parts <= MAX_PARTS && data.len() <= FRAME_DATA_BYTES;
    (part >= 1 && part <= parts && fits).then_some(Frame {
        runner,
        trial,
        part,
        parts,
        sum,
        data,
    })
}

/// What a log held: the records that arrived intact (kept as JSON text until merged), and
/// what was damaged, by trial.
#[derive(Debug, Default)]
pub struct Reassembled {
    pub records: BTreeMap<u32, RawResultLine>,
    pub damaged: BTreeMap<u32, String>,
}

/// The frames of one trial by (parts, digest), then by part number.
type Attempts = BTreeMap<(usize, String), BTreeMap<usize, String>>;

/// Reassembles the records of one runner from its log, read line by line: only that runner's
/// frame data is kept, at most `max_bytes` of it (a log read whole, or every record decoded at
/// once, is what once took the operator past its memory limit).
pub struct Reassembler {
    runner: u16,
    by_trial: BTreeMap<u32, Attempts>,
    kept_bytes: usize,
    max_bytes: usize,
    /// Frames dropped once `max_bytes` was reached, by trial.
    dropped: BTreeMap<u32, usize>,
}

impl Reassembler {
    pub fn new(runner: u16, max_bytes: usize) -> Self {
        Reassembler {
            runner,
            by_trial: BTreeMap::new(),
            kept_bytes: 0,
            max_bytes,
            dropped: BTreeMap::new(),
        }
    }

    /// Takes one log line; anything but this runner's frames is ignored, and a frame that
    /// repeats is kept once.
    pub fn push(&mut self, line: &str) {
        let Some(f) = parse_frame(line) else { return };
        if f.runner != self.runner {
            return;
        }
        if self.kept_bytes + f.data.len() > self.max_bytes {
            *self.dropped.entry(f.trial).or_default() += 1;
            return;
        }
        let parts = self.by_trial.entry(f.trial).or_default();
        let got = parts.entry((f.parts, f.sum.to_string())).or_default();
        if let std::collections::btree_map::Entry::Vacant(e) = got.entry(f.part) {
            self.kept_bytes += f.data.len();
            e.insert(f.data.to_string());
        }
    }

    /// Joins every trial's frames; a trial none of whose attempts is whole is damaged.
    pub fn finish(mut self) -> Reassembled {
        let mut out = Reassembled::default();
        for trial in self.dropped.keys() {
            self.by_trial.entry(*trial).or_default();
        }
        for (trial, attempts) in self.by_trial {
            let mut problems = Vec::new();
            for ((parts, sum), got) in attempts {
                match join(trial, self.runner, parts, &sum, &got) {
                    Ok(r) => {
                        out.records.insert(trial, r);
                        break;
                    }
                    Err(e) => problems.push(e),
                }
            }
            if let Some(n) = self.dropped.get(&trial) {
                problems.push(format!(
                    "{n} frames dropped past the {} byte limit on a runner's log records",
                    self.max_bytes
                ));
            }
            if !out.records.contains_key(&trial) {
                out.damaged.insert(trial, problems.join("; "));
            }
        }
        out
    }
}

/// Reassembles the records of `runner` from a whole log (see [`Reassembler`]).
pub fn reassemble(log: &str, runner: u16) -> Reassembled {
    let mut r = Reassembler::new(runner, usize::MAX);
    log.lines().for_each(|l| r.push(l));
    r.finish()
}

fn join(
    trial: u32,
    runner: u16,
    parts: usize,
    sum: &str,
    got: &BTreeMap<usize, String>,
) -> Result<RawResultLine, String> {
    let missing: Vec<usize> = (1..=parts).filter(|p| !got.contains_key(p)).collect();
    if !missing.is_empty() {
        return Err(missing_report(&missing, parts));
    }
    let record: String = got.values().map(String::as_str).collect();
    if digest(&record) != sum {
        return Err(format!(
            "{parts} frames joined but the digest does not match (a frame was altered in transit)"
        ));
    }
    let line: RawResultLine = serde_json::from_str(&record)
        .map_err(|e| format!("record passed its digest but does not parse: {e}"))?;
    if line.trial != trial || line.runner_id != runner {
        return Err(format!(
            "record says runner {} trial {}, its frames runner {runner} trial {trial}",
            line.runner_id, line.trial
        ));
    }
    Ok(line)
}

/// Names the missing frames, or counts them when there are many: a report never grows with
/// the parts a (possibly hostile) frame claims.
fn missing_report(missing: &[usize], parts: usize) -> String {
    let named: Vec<String> = missing
        .iter()
        .take(MISSING_NAMED)
        .map(|p| p.to_string())
        .collect();
    if missing.len() <= MISSING_NAMED {
        return format!("frames {} of {parts} missing from the log", named.join(","));
    }
    format!(
        "{} of {parts} frames missing from the log (first: {})",
        missing.len(),
        named.join(",")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitting_never_cuts_a_character() {
        let s = "aé€😀".repeat(100);
        for max in 1..9 {
            let parts = split_at_chars(&s, max.max(4));
            assert_eq!(parts.concat(), s);
            assert!(parts.iter().all(|p| p.len() <= max.max(4)));
        }
    }

    #[test]
    fn a_log_past_the_byte_limit_keeps_what_fits_and_says_what_was_dropped() {
        let line = |trial| crate::testing::record(3, trial, &[1000; 50], 50, 1);
        let all: Vec<String> = (1..=2).flat_map(|t| frames(&line(t)).unwrap()).collect();
        let first: usize = frames(&line(1)).unwrap().iter().map(|f| f.len()).sum();
        // Room for trial 1's frames (data is a bit smaller than the lines), not trial 2's.
        let mut r = Reassembler::new(3, first);
        for f in &all {
            r.push(&format!("noise {}", "x".repeat(100)));
            r.push(f);
        }
        let got = r.finish();
        assert_eq!(got.records.keys().copied().collect::<Vec<_>>(), [1]);
        assert!(got.damaged[&2].contains("byte limit"), "{:?}", got.damaged);
        let sent = crate::agent::RawResultLine::from_line(&line(1)).unwrap();
        assert_eq!(got.records[&1], sent);
    }

    #[test]
    fn a_frame_header_parses_after_garbage() {
        let l = "\u{1b}[2mnoise\u{1b}[0mMSGBENCH-FRAME v2 3 7 2/5 abcd {\"x\": 1}";
        let f = parse_frame(l).unwrap();
        assert_eq!((f.runner, f.trial, f.part, f.parts), (3, 7, 2, 5));
        assert_eq!(f.data, "{\"x\": 1}");
        assert!(parse_frame("MSGBENCH-FRAME v2 3 7 6/5 abcd x").is_none());
        assert!(parse_frame("MSGBENCH-FRAME v1 3 7 1/5 abcd x").is_none());
    }

    /// Each damaged trial's report stays short: it named every missing part, so a 60-byte line
    /// claiming 4096 parts grew into a 20 KB report (and a log of such lines into GBs).
    #[test]
    fn damage_reports_stay_small() {
        let log: String = (0..200)
            .map(|t| format!("MSGBENCH-FRAME v2 1 {t} 1/4096 abcd x\n"))
            .collect();
        let r = reassemble(&log, 1);
        assert_eq!(r.damaged.len(), 200);
        let report: usize = r.damaged.values().map(String::len).sum();
        assert!(
            report <= 4 * log.len(),
            "{report} bytes of report for {}",
            log.len()
        );
        assert!(
            r.damaged[&0].contains("4095 of 4096 frames missing"),
            "{}",
            r.damaged[&0]
        );
    }

    /// No frame holds more than the writer puts in one, so no record exceeds MAX_RECORD_BYTES
    /// whatever a log holds.
    #[test]
    fn a_frame_longer_than_the_writer_writes_is_not_a_frame() {
        let data = "x".repeat(FRAME_DATA_BYTES);
        assert!(parse_frame(&format!("MSGBENCH-FRAME v2 1 1 1/1 abcd {data}")).is_some());
        let over = format!("MSGBENCH-FRAME v2 1 1 1/1 abcd {data}x");
        assert!(parse_frame(&over).is_none());
    }

    /// A record too long for the reader is refused by the writer too, not silently lost.
    #[test]
    fn the_writer_refuses_a_record_the_reader_would() {
        let mut line = crate::testing::record(1, 1, &[10], 1, 0);
        line.result.target = "x".repeat(MAX_RECORD_BYTES);
        let e = frames(&line).unwrap_err().to_string();
        assert!(e.contains("more than"), "{e}");
    }
}
