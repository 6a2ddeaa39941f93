//! Sending `trace.bin` files ([`send_files`], streaming) or a decoded [`Trace`] ([`send`]) to a
//! running backend, as `waffle-decode --send` does:
//!
//! - **Zipkin**: `POST /api/v2/spans`, Zipkin v2 JSON (`application/json`), the spans of the
//!   [Zipkin exporter](crate::export::zipkin), byte for byte as it writes them;
//! - **OTLP/HTTP**: `POST /v1/traces`, a protobuf `ExportTraceServiceRequest`
//!   (`application/x-protobuf`), the [OTLP exporter](crate::export::otlp)'s request. This is the
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
//! use waffle_decode::send::{self, Options, Target};
//! let decoded = waffle_decode::decode::decode_files(&["rank0.bin", "rank1.bin"])?;
//! let target: Target = "otlp=http://127.0.0.1:4318".parse()?;
//! let report = send::send(&decoded.trace, &target, &Options::default())?;
//! eprintln!("{} spans in {} requests, {} retries", report.spans, report.requests, report.retries);
//! # Ok(()) }
//! ```

use std::fmt;
use std::str::FromStr;
use std::time::{Duration, Instant};

use crate::export::{otlp, spans::Source, zipkin, Files, Format};
use crate::model::Trace;

mod answer;
mod http;
mod retry;

pub use retry::{parse_retry_after, GiveUp, Policy};

use answer::Verdict;
use retry::secs;

/// A backend's protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// Zipkin's v2 API.
    Zipkin,
    /// OTLP over HTTP, in protobuf.
    Otlp,
}

impl Protocol {
    /// The name `--send` takes: `zipkin`, `otlp`.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Zipkin => "zipkin",
            Protocol::Otlp => "otlp",
        }
    }

    /// The path spans are posted to.
    pub fn path(self) -> &'static str {
        match self {
            Protocol::Zipkin => "/api/v2/spans",
            Protocol::Otlp => "/v1/traces",
        }
    }

    /// The format its requests carry.
    pub fn format(self) -> Format {
        match self {
            Protocol::Zipkin => Format::Zipkin,
            Protocol::Otlp => Format::Otlp,
        }
    }

    /// The content type of the requests.
    pub fn content_type(self) -> &'static str {
        match self {
            Protocol::Zipkin => "application/json",
            Protocol::Otlp => "application/x-protobuf",
        }
    }
}

/// Where to send, as `--send` takes it: `zipkin=http://127.0.0.1:9411` or
/// `otlp=http://127.0.0.1:4318`.
///
/// The URL is the server's base; the protocol's path ([`Protocol::path`]) is appended unless
/// the URL already ends with it, so `http://host:9411`, `http://host:9411/` and
/// `http://host:9411/api/v2/spans` all post to the last, and `http://proxy/zipkin` to
/// `http://proxy/zipkin/api/v2/spans` (OTLP's rule for a base endpoint). `https://` needs
/// waffle-std's `https` feature.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// The protocol.
    pub protocol: Protocol,
    /// The URL posted to, path included.
    pub url: String,
}

impl FromStr for Target {
    type Err = String;

    fn from_str(s: &str) -> Result<Target, String> {
        let (name, base) = s.split_once('=').ok_or_else(|| {
            format!("`{s}`: expected KIND=URL, such as zipkin=http://127.0.0.1:9411 or otlp=http://127.0.0.1:4318")
        })?;
        let protocol = match name.trim().to_ascii_lowercase().as_str() {
            "zipkin" => Protocol::Zipkin,
            "otlp" => Protocol::Otlp,
            other => return Err(format!("unknown kind `{other}` in `{s}`; known: zipkin, otlp")),
        };
        let base = base.trim();
        let scheme = ["http://", "https://"]
            .into_iter()
            .find(|p| base.get(..p.len()).is_some_and(|head| head.eq_ignore_ascii_case(p)))
            .ok_or_else(|| format!("`{base}`: the URL must start with http:// or https://"))?;
        if scheme == "https://" && !cfg!(feature = "https") {
            return Err(format!(
                "`{base}`: https needs waffle-decode built with the `https` feature of waffle-std (cargo build --features https)"
            ));
        }
        if base.contains(['?', '#']) || base.contains(char::is_whitespace) {
            return Err(format!("`{base}`: give the server's base URL, without query, fragment or spaces"));
        }
        let rest = base[scheme.len()..].trim_end_matches('/');
        if rest.is_empty() || rest.starts_with('/') {
            return Err(format!("`{base}` names no host"));
        }
        let path = if rest.ends_with(protocol.path()) { "" } else { protocol.path() };
        let url = format!("{scheme}{rest}{path}");
        http::check_url(&url)?;
        Ok(Target { protocol, url })
    }
}

impl Target {
    /// The format to scan files for before sending them here ([`send_files`]).
    pub fn format(&self) -> Format {
        self.protocol.format()
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} endpoint {}", self.protocol.name(), self.url)
    }
}

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
    pub target: Target,
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
pub fn send(trace: &Trace, target: &Target, options: &Options) -> Result<Report, Box<SendError>> {
    run(target, options, |protocol, max, each| match protocol {
        Protocol::Zipkin => zipkin::for_each_span(Source::Trace(trace), each.zipkin(max)),
        Protocol::Otlp => otlp::for_each_batch(Source::Trace(trace), max, |b| each.post(&b.body, b.spans)),
    })
}

/// Sends the spans of the files `files` has scanned (for [`Target::format`]) to `target`,
/// streaming: no more than a batch is held. `progress` is told the bytes read.
///
/// # Panics
/// If `files` was scanned for another format than the target's.
pub fn send_files(
    files: Files,
    target: &Target,
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
    target: &Target,
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

/// One send in progress.
struct Sender<'a> {
    client: http::Client,
    target: &'a Target,
    policy: &'a Policy,
    report: Report,
    started: Instant,
    /// Why the send stopped, when a batch could not be sent.
    failed: Option<Box<SendError>>,
    /// Zipkin: the JSON array of the batch being made, and its span count.
    body: Vec<u8>,
    count: usize,
}

impl<'a> Sender<'a> {
    /// Zipkin's spans one at a time, posted `max` to a request.
    fn zipkin<'s>(
        &'s mut self,
        max: usize,
    ) -> impl FnMut(serde_json::Value) -> std::io::Result<()> + use<'s, 'a> {
        move |span| {
            self.body.push(if self.count == 0 { b'[' } else { b',' });
            serde_json::to_writer(&mut self.body, &span)?;
            self.count += 1;
            if self.count == max {
                self.post_zipkin_batch().map_err(|e| self.stop(e))?;
            }
            Ok(())
        }
    }

    /// Closes the JSON array of the batch, posts it and starts the next.
    fn post_zipkin_batch(&mut self) -> Result<(), Box<SendError>> {
        self.body.push(b']');
        let body = std::mem::take(&mut self.body);
        let sent = self.post_once(&body, self.count);
        (self.body, self.count) = (body, 0);
        self.body.clear();
        sent
    }

    /// Posts one batch, or keeps why it could not be and stops the walk.
    fn post(&mut self, body: &[u8], spans: usize) -> std::io::Result<()> {
        self.post_once(body, spans).map_err(|e| self.stop(e))
    }

    /// Keeps the failure; what stops the walk.
    fn stop(&mut self, failure: Box<SendError>) -> std::io::Error {
        self.failed = Some(failure);
        std::io::Error::other("the send stopped")
    }

    /// Posts one batch of `spans` spans, trying again as the policy allows.
    fn post_once(&mut self, body: &[u8], spans: usize) -> Result<(), Box<SendError>> {
        let (target, policy) = (self.target, self.policy);
        let started = Instant::now();
        let mut made = 0;
        loop {
            made += 1;
            let timeout = policy.attempt_timeout(started.elapsed());
            let outcome = self.client.post(&target.url, target.protocol.content_type(), body, timeout);
            let (error, retry_after) = match outcome {
                Ok(answer) => match answer::verdict(answer.status) {
                    Verdict::Accepted => {
                        self.accepted(&answer, spans);
                        return Ok(());
                    }
                    Verdict::Retry => {
                        let now = std::time::SystemTime::now();
                        let asked = answer.retry_after.as_deref().and_then(|v| parse_retry_after(v, now));
                        (answer::describe(&answer), asked)
                    }
                    Verdict::Refused => {
                        return Err(self.error(answer::describe(&answer), None, made, started))
                    }
                },
                Err(f) if f.transient => (f.error, None),
                Err(f) => return Err(self.error(f.error, None, made, started)),
            };
            match policy.delay(made, started.elapsed(), retry_after) {
                Ok(wait) => {
                    std::thread::sleep(wait);
                    self.report.retries += 1;
                }
                Err(why) => return Err(self.error(error, Some(why), made, started)),
            }
        }
    }

    fn accepted(&mut self, answer: &http::Answer, spans: usize) {
        self.report.requests += 1;
        let rejected = match answer::partial_success(answer) {
            Some((rejected, message)) => {
                let what = if message.is_empty() { String::new() } else { format!(": {message}") };
                let request = self.report.requests;
                self.report.warnings.push(format!(
                    "request {request}: the server rejected {rejected} of {spans} spans{what}"
                ));
                rejected
            }
            None => 0,
        };
        self.report.rejected += rejected;
        self.report.spans += spans.saturating_sub(usize::try_from(rejected).unwrap_or(usize::MAX));
    }

    fn error(
        &mut self,
        error: String,
        gave_up: Option<GiveUp>,
        attempts: u32,
        started: Instant,
    ) -> Box<SendError> {
        let mut sent = self.report.clone();
        sent.elapsed = self.started.elapsed();
        let spent = started.elapsed();
        Box::new(SendError { target: self.target.clone(), error, gave_up, attempts, spent, sent })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets() {
        for (given, url) in [
            ("zipkin=http://127.0.0.1:9411", "http://127.0.0.1:9411/api/v2/spans"),
            ("zipkin=http://127.0.0.1:9411/", "http://127.0.0.1:9411/api/v2/spans"),
            ("ZIPKIN=http://localhost:9411/api/v2/spans", "http://localhost:9411/api/v2/spans"),
            ("zipkin=http://proxy/zipkin", "http://proxy/zipkin/api/v2/spans"),
            ("otlp=http://127.0.0.1:4318", "http://127.0.0.1:4318/v1/traces"),
            ("otlp=HTTP://[::1]:4318/v1/traces/", "http://[::1]:4318/v1/traces"),
            ("otlp=http://user:secret@[::1]/", "http://user:secret@[::1]/v1/traces"),
        ] {
            let t: Target = given.parse().unwrap_or_else(|e| panic!("{given}: {e}"));
            assert_eq!(t.url, url, "{given}");
        }
        let t: Target = "otlp=http://h:4318".parse().unwrap();
        assert_eq!(
            (t.protocol, t.to_string()),
            (Protocol::Otlp, "otlp endpoint http://h:4318/v1/traces".into())
        );
        for (bad, says) in [
            ("http://127.0.0.1:9411", "expected KIND=URL"),
            ("jaeger=http://h:1", "unknown kind `jaeger`"),
            ("zipkin=127.0.0.1:9411", "must start with http://"),
            ("zipkin=ftp://h", "must start with http://"),
            ("zipkin=http://", "names no host"),
            ("zipkin=http:///api/v2/spans", "names no host"),
            ("zipkin=http://h:9411?x=1", "without query"),
            ("zipkin=http://h a", "spaces"),
            ("otlp=http://h:notaport", "bad port"),
            ("otlp=http://[::1]:99999", "bad port"),
            ("otlp=http://h:1:2", "not a URL"),
        ] {
            let err = bad.parse::<Target>().unwrap_err();
            assert!(err.contains(says), "{bad}: {err}");
        }
        let https = "otlp=https://collector:4318".parse::<Target>();
        if cfg!(feature = "https") {
            assert_eq!(https.unwrap().url, "https://collector:4318/v1/traces");
        } else {
            assert!(https.unwrap_err().contains("`https` feature"));
        }
    }

    #[test]
    fn error_messages() {
        let target: Target = "zipkin=http://127.0.0.1:1".parse().unwrap();
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
