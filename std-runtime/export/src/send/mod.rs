//! Sending `trace.bin` files ([`send_files`], streaming) or a decoded [`Trace`] ([`send`]) to a
//! running backend, as `waffle-decode --send` does:
//!
//! - **Zipkin**: `POST /api/v2/spans`, Zipkin v2 JSON (`application/json`), the spans of the
//!   [Zipkin exporter](crate::zipkin), byte for byte as it writes them;
//! - **OTLP/HTTP**: `POST /v1/traces`, a protobuf `ExportTraceServiceRequest`
//!   (`application/x-protobuf`), the [OTLP exporter](crate::otlp)'s request. This is the
//!   way to an OpenTelemetry collector, Jaeger or Tempo.
//!
//! Spans go in batches of at most [`Options::batch_spans`], one request each, in order. A
//! request that gets no answer (the connection failed or timed out), or a 429 or 5xx, is tried
//! again after an exponential backoff, within a number of attempts and a time budget
//! ([`Policy`]), waiting at least as long as the server's `Retry-After` asks. Any other 4xx is
//! the request's own fault: it is not tried again, and the error carries the server's message.
//! The first batch that cannot be sent ends the send; [`SendError`] says which endpoint, what
//! went wrong, how many attempts over how long, and what had been sent before.
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use waffle_export::send::{self, Options, Endpoint};
//! let decoded = waffle_read::decode::decode_files(&["rank0.bin", "rank1.bin"])?;
//! let target: Endpoint = "otlp=http://127.0.0.1:4318".parse()?;
//! let report = send::send(&decoded.trace, &target, &Options::default())?;
//! eprintln!("{} spans in {} requests, {} retries", report.spans, report.requests, report.retries);
//! # Ok(()) }
//! ```

use std::fmt;
use std::time::{Duration, Instant};

use crate::model::Trace;
use crate::{otlp, spans::Source, zipkin, Files};

mod answer;
mod endpoint;
mod http;
pub(crate) mod poster;
mod retry;
mod sender;

pub use endpoint::{Endpoint, Protocol};
pub use retry::{parse_retry_after, GiveUp, Policy};

use retry::secs;
use sender::Sender;

/// How to send.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// The most spans one request carries (at least 1); 1000 by default.
    pub batch_spans: usize,
    /// When to try a request again.
    pub policy: Policy,
}

impl Default for Options {
    fn default() -> Self {
        Options { batch_spans: 1000, policy: Policy::default() }
    }
}

/// What a send did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// Spans the server took (for OTLP, less those it said it rejected).
    pub spans: usize,
    /// Requests the server took, one per batch.
    pub requests: usize,
    /// Attempts made again after a failure.
    pub retries: usize,
    /// Spans an OTLP server took the request of but said it rejected (a partial success).
    pub rejected: u64,
    /// What the server said when it rejected some, one line per request.
    pub warnings: Vec<String>,
    /// Time from the first request to the end.
    pub elapsed: Duration,
}

/// Why a send stopped.
#[derive(Clone, Debug)]
pub struct SendError {
    /// Where to.
    pub target: Endpoint,
    /// The last failure: the connection's error, or the status and the server's message.
    pub error: String,
    /// Why no further attempt was made; `None` when the failure is not worth another
    /// attempt (a 4xx other than 429, a redirect, a TLS or URL error).
    pub gave_up: Option<GiveUp>,
    /// Attempts made at the request that failed.
    pub attempts: u32,
    /// Time spent on that request, waits included.
    pub spent: Duration,
    /// What had been sent before it (its `elapsed`: up to the failure).
    pub sent: Report,
}

impl fmt::Display for SendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sending to {} failed: {}; ", self.target, self.error)?;
        let tries =
            if self.attempts == 1 { "1 attempt".to_owned() } else { format!("{} attempts", self.attempts) };
        match self.gave_up {
            Some(why) => write!(f, "gave up after {tries} in {} ({why})", secs(self.spent))?,
            None => write!(f, "not retried ({tries}, {})", secs(self.spent))?,
        }
        match (self.sent.spans, self.sent.requests) {
            (_, 0) => write!(f, "; nothing was sent"),
            (spans, 1) => write!(f, "; {spans} spans had been sent in 1 request"),
            (spans, requests) => write!(f, "; {spans} spans had been sent in {requests} requests"),
        }
    }
}

impl std::error::Error for SendError {}

/// Sends every span of `trace` to `target`, in batches, and says what it did (or, boxed, why
/// it stopped).
pub fn send(trace: &Trace, target: &Endpoint, options: &Options) -> Result<Report, Box<SendError>> {
    run(target, options, |protocol, max, each| match protocol {
        Protocol::Zipkin => zipkin::for_each_span(Source::Trace(trace), each.zipkin(max)),
        Protocol::Otlp => otlp::for_each_batch(Source::Trace(trace), max, |b| each.post(&b.body, b.spans)),
    })
}

/// Sends the spans of the files `files` has scanned (for [`Endpoint::format`]) to `target`,
/// streaming: no more than a batch is held. `progress` is told the bytes read.
///
/// # Panics
/// If `files` was scanned for another format than the target's.
pub fn send_files(
    files: Files,
    target: &Endpoint,
    options: &Options,
    progress: &mut dyn FnMut(u64),
) -> Result<Report, Box<SendError>> {
    assert_eq!(files.format(), target.format(), "scanned for another format");
    let export = files.into_spans().expect("span formats stream spans");
    run(target, options, |protocol, max, each| match protocol {
        Protocol::Zipkin => {
            zipkin::for_each_span(Source::Files(Box::new(export), progress), each.zipkin(max))
        }
        Protocol::Otlp => otlp::for_each_batch(Source::Files(Box::new(export), progress), max, |b| {
            each.post(&b.body, b.spans)
        }),
    })
}

/// Runs `walk`, which hands batches to the sender as it makes them.
fn run(
    target: &Endpoint,
    options: &Options,
    walk: impl FnOnce(Protocol, usize, &mut Sender<'_>) -> std::io::Result<()>,
) -> Result<Report, Box<SendError>> {
    let mut sender = Sender {
        client: http::Client::new(),
        target,
        policy: &options.policy,
        report: Report::default(),
        started: Instant::now(),
        failed: None,
        body: Vec::new(),
        count: 0,
    };
    let walked = walk(target.protocol, options.batch_spans.max(1), &mut sender);
    let result = match (walked, sender.failed.take()) {
        (_, Some(failure)) => Err(failure),
        (Ok(()), None) if sender.count > 0 => sender.post_zipkin_batch(),
        (Ok(()), None) => Ok(()),
        // The files could not be read a second time.
        (Err(e), None) => Err(sender.error(e.to_string(), None, 0, Instant::now())),
    };
    sender.report.elapsed = sender.started.elapsed();
    result.map(|()| sender.report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_messages() {
        let target: Endpoint = "zipkin=http://127.0.0.1:1".parse().unwrap();
        let sent = Report { spans: 6, requests: 2, ..Report::default() };
        let down = SendError {
            target: target.clone(),
            error: "Connection refused (os error 111)".into(),
            gave_up: Some(GiveUp::Attempts),
            attempts: 5,
            spent: Duration::from_millis(1500),
            sent: sent.clone(),
        };
        assert_eq!(
            down.to_string(),
            "sending to zipkin endpoint http://127.0.0.1:1/api/v2/spans failed: Connection refused (os error 111); \
             gave up after 5 attempts in 1.50 s (no attempts left); 6 spans had been sent in 2 requests"
        );
        let refused =
            SendError { error: "HTTP 400 Bad Request: no".into(), gave_up: None, attempts: 1, ..down };
        assert!(refused
            .to_string()
            .contains("failed: HTTP 400 Bad Request: no; not retried (1 attempt, 1.50 s)"));
        let first = SendError { sent: Report::default(), ..refused };
        assert!(first.to_string().ends_with("not retried (1 attempt, 1.50 s); nothing was sent"), "{first}");
    }
}
