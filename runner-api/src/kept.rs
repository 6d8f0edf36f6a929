//! `ackedNotKept` through merge: acknowledged messages the JetStream stream no longer held
//! when read back after the drain. Summed like `lostAcked`, except that one runner (or trial)
//! whose read-back could not complete makes the merged figure unavailable: a sum over the
//! others would read as a smaller loss, and a `le 0` threshold would pass on it (the merge is
//! `SegmentStats::add`'s; the reasons' rules are here).
/// Longest merged reason a runner result keeps.
pub const MAX_UNAVAILABLE_CHARS: usize = 512;
/// Longest reason the status keeps (its schema's limit: the status must stay within etcd's
/// object limit with every variant's result at its widest, `status_size`).
pub const MAX_STATUS_UNAVAILABLE_CHARS: usize = 80;

/// Distinct reasons joined with "; " (in order of arrival), cut to the schema's limit.
pub(crate) fn join_reasons(a: Option<String>, b: Option<&str>) -> Option<String> {
    let joined = match (a, b) {
        (Some(a), Some(b)) if a.split("; ").any(|r| r == b) => a,
        (Some(a), Some(b)) => format!("{a}; {b}"),
        (a, b) => a.or(b.map(str::to_string))?,
    };
    Some(truncate(joined, MAX_UNAVAILABLE_CHARS))
}

/// The reason as the status keeps it.
pub fn status_reason(why: &str) -> String {
    truncate(why.to_string(), MAX_STATUS_UNAVAILABLE_CHARS)
}

fn truncate(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut end = max - '…'.len_utf8();
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
        s.push('…');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::{aggregate_measured, AckedNotKeptFrom, Delivery, SegmentStats};

    fn seg(n: Option<u64>, from: Option<AckedNotKeptFrom>, why: Option<&str>) -> SegmentStats {
        SegmentStats {
            acked_not_kept: n,
            acked_not_kept_from: from,
            acked_not_kept_unavailable: why.map(str::to_string),
            ..SegmentStats::new("m", 1, Delivery::FanOut)
        }
    }

    #[test]
    fn acked_not_kept_sums_and_stream_gone_wins_through_merge() {
        use AckedNotKeptFrom::*;
        let a = seg(Some(2), Some(ReadBack), None);
        let b = seg(Some(5), Some(StreamGone), None);
        let mut m = a.clone();
        m.add(&b);
        assert_eq!(
            (m.acked_not_kept, m.acked_not_kept_from),
            (Some(7), Some(StreamGone))
        );
        let mut n = b.clone();
        n.add(&a);
        assert_eq!(
            (n.acked_not_kept, n.acked_not_kept_from),
            (Some(7), Some(StreamGone))
        );
        // Phases of one runner aggregate the same way.
        assert_eq!(aggregate_measured(&[a, b]).acked_not_kept, Some(7));
        // Other protocols: unavailable stays unavailable, with no reason; 0 stays 0.
        let none = seg(None, None, None);
        let mut m = none.clone();
        m.add(&none);
        assert_eq!(
            (m.acked_not_kept, m.acked_not_kept_unavailable),
            (None, None)
        );
        let mut z = seg(Some(0), Some(ReadBack), None);
        z.add(&none);
        assert_eq!(z.acked_not_kept, Some(0));
    }

    /// One runner's read-back that did not complete makes the merged figure unavailable, in
    /// either order and however many complete ones follow; its reason is kept once.
    #[test]
    fn an_incomplete_read_back_makes_the_merged_figure_unavailable() {
        let ok = seg(Some(3), Some(AckedNotKeptFrom::ReadBack), None);
        let bad = seg(None, None, Some("runner 2: timed out"));
        for parts in [[&ok, &bad, &ok], [&bad, &ok, &bad]] {
            let mut m = parts[0].clone();
            parts[1..].iter().for_each(|p| m.add(p));
            assert_eq!(m.acked_not_kept, None);
            assert_eq!(
                m.acked_not_kept_unavailable.as_deref(),
                Some("runner 2: timed out")
            );
        }
        let mut two = bad.clone();
        two.add(&seg(None, None, Some("runner 3: 503")));
        let why = two.acked_not_kept_unavailable.unwrap();
        assert_eq!(why, "runner 2: timed out; runner 3: 503");
        let json = serde_json::to_value(&ok).unwrap();
        assert_eq!(json["ackedNotKept"], 3);
        assert_eq!(json["ackedNotKeptFrom"], "readBack");
        assert!(json.get("ackedNotKeptUnavailable").is_none());
    }

    #[test]
    fn reasons_are_cut_to_the_schema_limit() {
        let long = "é".repeat(400);
        let mut m = seg(None, None, Some(&long));
        m.add(&seg(None, None, Some("other")));
        let why = m.acked_not_kept_unavailable.unwrap();
        assert!(
            why.len() <= MAX_UNAVAILABLE_CHARS && why.ends_with('…'),
            "{}",
            why.len()
        );
    }
}
