//! After the drain, reads the trial's stream back (a fresh ordered consumer, DeliverPolicy::All,
//! filtered to this runner's publish subjects) and collects which of this runner's messages it
//! still holds: the `ackedNotKept` read (see `crate::kept`). Bounded: right after a fault the
//! servers may not answer, answer 503 (JetStream temporarily unavailable) or not have
//! recovered the stream's metadata yet, so every failure is retried until the bound, and the
//! stream is concluded gone only if its last answer before the bound was still 404.
use crate::kept::{Kept, ReadBack, ReadScope};
use crate::payload::Header;
use async_nats::jetstream::{self, consumer, stream};
use futures::StreamExt;
use std::time::Duration;
use tokio::time::{timeout_at, Instant};

/// The whole read-back, retries included.
pub const BOUND: Duration = Duration::from_secs(30);
const RETRY_EVERY: Duration = Duration::from_millis(250);
/// JetStream API error code of "stream not found" (HTTP-like code 404).
const STREAM_NOT_FOUND: u64 = 10059;

/// What one try found, short of a complete read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// 404 stream not found.
    NotFound,
    /// No answer, another error, or a read cut short: worth another try.
    Unavailable(String),
}

/// How the stream's lookup failed: JetStream's own code if it answered, else unavailable.
pub fn answer_of(err_code: Option<u64>, text: String) -> Answer {
    match err_code {
        Some(STREAM_NOT_FOUND) => Answer::NotFound,
        _ => Answer::Unavailable(text),
    }
}

/// What a read-back that found no complete read within its bound concludes from the last
/// answer. Only the runner that creates and deletes the stream may call it gone: with several
/// runners, runner 1 deletes it once its own run is over, so another runner's 404 may just be
/// that.
pub fn at_bound(last: Option<Answer>, may_call_gone: bool) -> ReadBack {
    // Short: the status keeps 80 characters of it (the log has it whole).
    match last {
        Some(Answer::NotFound) if may_call_gone => Ok(Kept::stream_gone()),
        Some(Answer::NotFound) => Err("stream not found (runner 1 may have deleted it)".into()),
        Some(Answer::Unavailable(why)) => Err(format!("{why}, for {}s", BOUND.as_secs())),
        None => Err(format!("no answer for {}s", BOUND.as_secs())),
    }
}

/// Where to read: the trial's stream, and the setup token its metadata must carry (another
/// trial's stream of the same name is not this trial's).
pub struct Target<'a> {
    pub stream: &'a str,
    pub token: Option<(&'a str, &'a str)>,
    /// Subjects of this runner's publishers.
    pub subjects: Vec<String>,
    /// Whether a lasting 404 may be called gone (see [`at_bound`]).
    pub may_call_gone: bool,
}

/// Tries until a complete read or the bound. `connect` opens a connection (retried: the servers
/// may still be coming back).
pub async fn read_back<F, Fut>(connect: F, t: Target<'_>, scope: &ReadScope) -> ReadBack
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<async_nats::Client>>,
{
    let deadline = Instant::now() + BOUND;
    let mut js: Option<jetstream::Context> = None;
    let mut last = None;
    while Instant::now() < deadline {
        if js.is_none() {
            match timeout_at(deadline, connect()).await {
                Ok(Ok(c)) => js = Some(jetstream::new(c)),
                Ok(Err(e)) => last = Some(Answer::Unavailable(format!("connect: {e}"))),
                Err(_) => break,
            }
        }
        if let Some(js) = &js {
            match try_once(js, &t, scope, deadline).await {
                Ok(kept) => return Ok(kept),
                Err(a) => last = Some(a),
            }
        }
        tokio::time::sleep(RETRY_EVERY.min(deadline.saturating_duration_since(Instant::now())))
            .await;
    }
    at_bound(last, t.may_call_gone)
}

/// One look at the stream and, if it is there, one full read of it.
async fn try_once(
    js: &jetstream::Context,
    t: &Target<'_>,
    scope: &ReadScope,
    deadline: Instant,
) -> Result<Kept, Answer> {
    let stream = match timeout_at(deadline, js.get_stream(t.stream)).await {
        Err(_) => {
            return Err(Answer::Unavailable(
                "looking the stream up timed out".into(),
            ))
        }
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            return Err(match e.kind() {
                jetstream::context::GetStreamErrorKind::JetStream(j) => {
                    answer_of(Some(j.error_code().0), j.to_string())
                }
                other => answer_of(None, format!("stream info: {other}")),
            });
        }
    };
    if let Some((key, token)) = t.token {
        let meta = &stream.cached_info().config.metadata;
        if meta.get(key).map(String::as_str) != Some(token) {
            return Err(Answer::Unavailable(
                "stream replaced by another trial's".into(),
            ));
        }
    }
    read(&stream, &t.subjects, scope, deadline).await
}

/// Reads every stored message on `subjects` from the first, noting this runner's.
async fn read(
    stream: &stream::Stream,
    subjects: &[String],
    scope: &ReadScope,
    deadline: Instant,
) -> Result<Kept, Answer> {
    let unavailable =
        |what: &str, e: &dyn std::fmt::Display| Answer::Unavailable(format!("{what}: {e}"));
    // One subject as `filter_subject`: servers before 2.10 know no `filter_subjects`.
    let (filter_subject, filter_subjects) = match subjects {
        [one] => (one.clone(), Vec::new()),
        many => (String::new(), many.to_vec()),
    };
    let config = consumer::pull::OrderedConfig {
        filter_subject,
        filter_subjects,
        deliver_policy: consumer::DeliverPolicy::All,
        ..Default::default()
    };
    let c = timeout_at(deadline, stream.create_consumer(config))
        .await
        .map_err(|e| unavailable("consumer", &e))?
        .map_err(|e| unavailable("consumer", &e))?;
    let mut kept = Kept::read_back();
    if c.cached_info().num_pending == 0 {
        return Ok(kept);
    }
    let mut msgs = (c.messages().await).map_err(|e| unavailable("read", &e))?;
    let mut read = 0u64;
    loop {
        let m = match timeout_at(deadline, msgs.next()).await {
            Err(_) => return Err(unavailable("read timed out", &format!("{read} read"))),
            Ok(None) => return Err(unavailable("read", &"the consumer ended")),
            Ok(Some(Err(e))) => return Err(unavailable("read", &e)),
            Ok(Some(Ok(m))) => m,
        };
        read += 1;
        if let Some(h) = Header::decode(&m.payload) {
            kept.note(&h, scope);
        }
        if m.info().map_err(|e| unavailable("read", &e))?.pending == 0 {
            return Ok(kept);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use runner_api::result::AckedNotKeptFrom;

    #[test]
    fn only_jetstreams_stream_not_found_reads_as_not_found() {
        assert_eq!(answer_of(Some(10059), "x".into()), Answer::NotFound);
        // 503 "JetStream system temporarily unavailable", no answer at all: try again.
        let busy = answer_of(Some(10008), "503".into());
        assert_eq!(busy, Answer::Unavailable("503".into()));
        assert_eq!(
            answer_of(None, "timed out".into()),
            Answer::Unavailable("timed out".into())
        );
    }

    /// Gone only when the last answer before the bound was still 404, and only for the runner
    /// that owns the stream; a 503 or silence at the bound leaves the figure unavailable.
    #[test]
    fn the_stream_is_gone_only_when_404_lasts_until_the_bound_for_its_owner() {
        use Answer::*;
        let busy = || Unavailable("JetStream system temporarily unavailable".into());
        // The read-back's tries, in order: only the last answer before the bound decides.
        let ends = |tries: Vec<Answer>, owner| at_bound(tries.into_iter().last(), owner);
        let gone = ends(vec![busy(), busy(), NotFound, NotFound], true).unwrap();
        assert_eq!(gone.from, AckedNotKeptFrom::StreamGone);
        assert_eq!(gone.found(), 0);
        // 404 right after the fault, then 503 again: not gone, unavailable.
        let why = ends(vec![NotFound, NotFound, busy()], true).unwrap_err();
        assert_eq!(why, "JetStream system temporarily unavailable, for 30s");
        // Runner 1 deletes the stream it created: another runner's 404 may be that.
        let follower = ends(vec![NotFound], false).unwrap_err();
        assert!(
            follower.contains("runner 1 may have deleted it"),
            "{follower}"
        );
        assert_eq!(ends(vec![], true).unwrap_err(), "no answer for 30s");
        for why in [follower, ends(vec![busy()], true).unwrap_err()] {
            assert!(why.len() + "runner 64: ".len() <= 80, "{why}");
        }
    }
}
