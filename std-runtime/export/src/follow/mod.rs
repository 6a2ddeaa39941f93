//! Sending spans while the traced program still runs: `waffle-decode --follow FILES --send
//! otlp=URL` ([`follow_files`]), or, with no second process, from the traced program's own
//! collector thread ([`live`], for `waffle_std::Config::live`).
//!
//! Both read the trace as the collector writes it, in one pass, and send each span to an OTLP
//! (or Zipkin) backend soon after its end is written, encoded as the file export encodes it: spans are batched by time (a batch goes when it holds
//! [`Options::batch_spans`] or its oldest span has waited [`Options::batch_delay`]). Between the
//! reader and the network sits a bounded queue ([`Options::buffer_spans`]): a backend that goes
//! away costs spans beyond the bound, dropped and counted, never memory and never the traced
//! program's time (it only writes its file). While the backend is away the sender tries again
//! and again, and sends what it held once it is back. A file is done when its END frame is
//! read; when all are, the rest is sent (within [`Options::stop_wait`] if the backend is down)
//! and the [`Summary`] says what was sent, dropped and how late.
//!
//! Spans are assembled as the file export assembles them (`spans`: which events are logs of
//! which span, stand-ins, fresh ids), in one pass
//! ([`OnePass`](crate::spans::one_pass::OnePass)). What differs from exporting the finished files (`waffle-decode FILES --send otlp=URL`):
//! - nothing is resolved ahead: a parent or cause not open when it is named is sent as the id
//!   recorded. A cause that is an event links to the event's own id (the file export links to
//!   the span showing it), correlation groups are not turned into links (each span still
//!   carries `waffle.correlate`), and matching by order does not apply;
//! - ids are the recorded ones: a file given twice repeats them (the file export gives repeats
//!   fresh ids); a span whose begin was lost gets a fresh id, as in the file export;
//! - times use the header's clock calibration until a CLOCK frame refines it (the file export
//!   applies the last CLOCK frame to the whole file), so spans sent early may be off by the
//!   clock's drift over the run, typically microseconds;
//! - the resource has no `waffle.dropped_records` or `waffle.incomplete`: they are not known
//!   while the program runs. The summary says them instead;
//! - a TAIL frame (what a thread that stopped recording had staged) is decoded when it is read,
//!   not held until the file says whether a later chunk holds its records
//!   ([`Sink::EAGER_TAILS`](crate::decode::Sink::EAGER_TAILS)), so a blocked thread's spans
//!   are sent while it is blocked;
//! - the only file written while following is Chrome JSON in its array form, which may lack
//!   its closing `]` ([`follow_to`] with an output, `--follow FILES -o OUT.json`, see
//!   [`chrome_out`]); every other format here is one document written at the end.
//!
//! Memory holds the spans open at once (each with at most 128 events), the decoder's state per
//! thread, and the queue; nothing is kept of a span once it is queued.

use std::{
    fmt,
    path::{Path, PathBuf},
    sync::Arc,
    thread,
    time::Duration,
};

use crate::{
    decode::run,
    reader::{FrameReader, Warning},
    send::{poster::Poster, Endpoint, Policy, Protocol},
    spans::one_pass::OnePass,
};

mod chrome_out;
mod growing;
mod live;
mod queue;
mod sink;

pub use live::{live, live_with, Live, LiveReport};

/// How to follow and send.
#[derive(Clone, Debug)]
pub struct Options {
    /// The most spans a request carries (default 1000).
    pub batch_spans: usize,
    /// The longest a span waits for its batch to fill (default 250 ms).
    pub batch_delay: Duration,
    /// The most spans held for sending; beyond, spans are dropped and counted (default 200,000,
    /// about 60 MB of encoded spans at most).
    pub buffer_spans: usize,
    /// How long to wait for a file that does not exist yet; `None`: as long as it takes.
    pub wait: Option<Duration>,
    /// How long a file may stop growing before it counts as done without an END frame (its
    /// process was killed); `None` (the default): wait for the END frame.
    pub idle: Option<Duration>,
    /// How long to keep trying once every file is done and the backend is down (default 10 s);
    /// what is still held then counts as unsent.
    pub stop_wait: Duration,
    /// How each request is tried: its `timeout` bounds one attempt, and a request that gets
    /// no answer is tried again after `backoff`, doubling up to `max_backoff`, until it is
    /// taken (or the stop wait runs out); `attempts` and `budget` are not used.
    pub policy: Policy,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            batch_spans: 1000,
            batch_delay: Duration::from_millis(250),
            buffer_spans: 200_000,
            wait: Some(Duration::from_secs(30)),
            idle: None,
            stop_wait: Duration::from_secs(10),
            policy: Policy {
                attempts: 8,
                backoff: Duration::from_millis(50),
                max_backoff: Duration::from_millis(500),
                budget: Duration::from_secs(3),
                timeout: Duration::from_secs(3),
            },
        }
    }
}

/// Times from a span's end to the answer that took it, to the millisecond.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Latency {
    /// Counts per whole millisecond, up to 60 s (the last counts everything later).
    counts: Vec<u64>,
    max_ns: u64,
}

impl Latency {
    const MAX_MS: usize = 60_000;

    fn add(&mut self, ns: u64) {
        if self.counts.is_empty() {
            self.counts = vec![0; Self::MAX_MS + 1];
        }
        let ms = usize::try_from(ns / 1_000_000).unwrap_or(usize::MAX).min(Self::MAX_MS);
        self.counts[ms] += 1;
        self.max_ns = self.max_ns.max(ns);
    }

    /// Spans measured.
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// The time under which a fraction `q` (0 to 1) of spans were sent, rounded up to the ms.
    pub(crate) fn quantile(&self, q: f64) -> Duration {
        let want = (self.count() as f64 * q.clamp(0.0, 1.0)).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (ms, &n) in self.counts.iter().enumerate() {
            seen += n;
            if seen >= want {
                return Duration::from_millis(ms as u64 + 1).min(self.max());
            }
        }
        Duration::ZERO
    }

    /// The longest.
    pub fn max(&self) -> Duration {
        Duration::from_nanos(self.max_ns)
    }
}

/// One followed file.
#[derive(Clone, Debug, Default)]
pub struct FileSummary {
    /// The file, as given.
    pub source: PathBuf,
    /// Spans read (stand-ins included).
    pub spans: u64,
    /// Events read.
    pub events: u64,
    /// Records the traced program dropped (its buffers were full).
    pub dropped_records: u64,
    /// Whether it ended with an END frame.
    pub complete: bool,
    /// Why it could not be followed (missing after the wait, not a trace).
    pub error: Option<String>,
    /// Damage worked around.
    pub warnings: Vec<Warning>,
}

/// What a follow did.
#[derive(Clone, Debug, Default)]
pub struct Summary {
    /// Spans the backend took (events shown as spans of their own included).
    pub sent: u64,
    /// Spans dropped because the buffer was full (the backend was away or slow).
    pub dropped: u64,
    /// Spans still held when the stop wait ran out with the backend away.
    pub unsent: u64,
    /// Spans in requests the backend refused (a 4xx other than 429).
    pub refused: u64,
    /// Spans the backend took the request of but said it rejected.
    pub rejected: u64,
    /// (Live only) frames of records not decoded because the hand-off was full.
    pub lost_frames: u64,
    /// Requests the backend took.
    pub requests: u64,
    /// Attempts made again after a failure.
    pub retries: u64,
    /// Times the backend stopped answering.
    pub outages: u32,
    /// How long it was away, in all.
    pub down: Duration,
    /// From each span's end to the answer that took it.
    pub latency: Latency,
    /// Each file.
    pub files: Vec<FileSummary>,
    /// Spans and events written to the Chrome JSON output (0 without one).
    pub written: u64,
}

impl Summary {
    /// Spans not sent, whatever the reason.
    pub fn lost(&self) -> u64 {
        self.dropped + self.unsent + self.refused + self.rejected
    }
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let read: u64 = self.files.iter().map(|s| s.spans + s.events).sum();
        write!(
            f,
            "{read} spans and events read; {} spans sent in {} requests ({} retries); \
             dropped {} (buffer full), unsent {}, refused {}, rejected {}",
            self.sent, self.requests, self.retries, self.dropped, self.unsent, self.refused, self.rejected
        )?;
        if self.lost_frames > 0 {
            write!(f, ", {} frames lost in the hand-off", self.lost_frames)?;
        }
        if self.latency.count() > 0 {
            let ms = |d: Duration| d.as_secs_f64() * 1e3;
            write!(
                f,
                "; end to sent: p50 {:.0} ms, p99 {:.0} ms, max {:.0} ms",
                ms(self.latency.quantile(0.5)),
                ms(self.latency.quantile(0.99)),
                ms(self.latency.max())
            )?;
        }
        if self.outages > 0 {
            write!(f, "; backend away {} times, {:.1} s in all", self.outages, self.down.as_secs_f64())?;
        }
        Ok(())
    }
}

/// Follows `paths` (files being written, or still to be created) and sends their spans to
/// `target` as they end, until every file is done; `say` is told when the backend goes away
/// and comes back and when spans start being dropped. A file that cannot be followed says why
/// in its [`FileSummary::error`].
pub fn follow_files<P: AsRef<Path>>(
    paths: &[P],
    target: &Endpoint,
    options: &Options,
    say: &(dyn Fn(String) + Sync),
) -> Summary {
    follow_to(paths, Some(target), None, options, say).unwrap_or_default()
}

/// Follows `paths` as [`follow_files`] does, sending to `target` if there is one, and appending
/// each span and event to `output` (Chrome JSON, array form; see [`chrome_out`]) if there is
/// one, written out every [`Options::batch_delay`] and closed with `]` once every file is done.
/// An output that cannot be created, or written, is the error.
pub fn follow_to<P: AsRef<Path>>(
    paths: &[P],
    target: Option<&Endpoint>,
    output: Option<&Path>,
    options: &Options,
    say: &(dyn Fn(String) + Sync),
) -> Result<Summary, String> {
    let out = output.map(|path| chrome_out::ChromeOut::create(path, options.batch_delay)).transpose()?;
    let out = out.map(Arc::new);
    let queue = target.map(|_| queue::Queue::new(options.buffer_spans, options.batch_spans));
    let protocol = target.map_or(Protocol::Otlp, |t| t.protocol);
    let (mut summary, files, written) = thread::scope(|s| {
        let sender = target.zip(queue.as_ref()).map(|(target, queue)| {
            let poster = Poster::new(target.clone(), queue::one_attempt(options));
            s.spawn(move || queue::send(queue, poster, options, say))
        });
        if let Some(out) = &out {
            s.spawn(move || out.run());
        }
        let readers: Vec<_> = paths
            .iter()
            .map(|p| {
                let (path, queue, out) = (p.as_ref().to_owned(), queue.clone(), out.clone());
                s.spawn(move || follow_one(&path, queue, protocol, out, options))
            })
            .collect();
        let files: Vec<FileSummary> =
            readers.into_iter().map(|r| r.join().expect("a follower thread panicked")).collect();
        let written = out.as_ref().map(|out| out.close());
        if let Some(queue) = &queue {
            queue.close();
        }
        let summary = sender.map(|t| t.join().expect("the sender thread panicked")).unwrap_or_default();
        (summary, files, written)
    });
    summary.files = files;
    summary.written = written.transpose()?.unwrap_or(0);
    Ok(summary)
}

/// Reads one file to its end into the queue and the output.
fn follow_one(
    path: &Path,
    queue: Option<Arc<queue::Queue>>,
    protocol: Protocol,
    out: Option<Arc<chrome_out::ChromeOut>>,
    options: &Options,
) -> FileSummary {
    let mut file = FileSummary { source: path.to_owned(), ..FileSummary::default() };
    let mut pass = OnePass::new();
    let mut writer = sink::LiveWriter::new(queue, protocol, out);
    let result = growing::GrowingFile::open(path, options.wait, options.idle)
        .and_then(|input| FrameReader::new(input, path))
        .and_then(|reader| run::decode(reader, path, &mut pass.assembler(&mut writer)));
    match result {
        Ok(warnings) => file.warnings = warnings,
        Err(e) => file.error = Some(e.to_string()),
    }
    record(&mut file, &pass, &writer);
    file
}

/// What the pass over a file learnt.
fn record(file: &mut FileSummary, pass: &OnePass, writer: &sink::LiveWriter) {
    if let Some(p) = pass.process() {
        (file.spans, file.events, file.dropped_records) = (p.spans, p.events, p.dropped);
        file.complete = writer.ended && p.complete;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_quantiles_to_the_millisecond() {
        let mut l = Latency::default();
        assert_eq!((l.count(), l.quantile(0.5), l.max()), (0, Duration::ZERO, Duration::ZERO));
        for ms in 0..100u64 {
            l.add(ms * 1_000_000 + 500_000); // 0.5 ms, 1.5 ms, ... 99.5 ms
        }
        l.add(3_600 * 1_000_000_000); // an hour: counted in the last bucket, kept as the max
        assert_eq!(l.count(), 101);
        assert_eq!(l.quantile(0.5), Duration::from_millis(51));
        assert_eq!(l.quantile(0.99), Duration::from_millis(100));
        assert_eq!(l.max(), Duration::from_secs(3_600));
        assert_eq!(l.quantile(1.0), Duration::from_millis(60_001));
    }
}
