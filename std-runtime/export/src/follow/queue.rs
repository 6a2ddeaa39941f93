//! Spans on their way to the backend: a bounded queue the readers put encoded spans in, and
//! the thread that posts them in batches.
//!
//! A reader never waits for the network: when the queue holds its bound, the span is dropped
//! and counted ([`Queue::push`]), so a backend that is down costs spans, not memory and not
//! time. The sender takes a batch once it is full or its oldest span has waited the batch
//! delay, and posts it; a batch that gets no answer (connection refused, timeout, 5xx, 429) is
//! tried again, over and over, while spans keep arriving and are held up to the bound; the
//! first failure and the recovery are said once each. A batch the server refuses (another 4xx)
//! is not tried again: its spans count as refused. Once every reader is done ([`Queue::close`])
//! the rest is sent, for at most the stop wait if the backend is still down; what is left then
//! counts as unsent.

use std::{
    collections::VecDeque,
    sync::{Arc, Condvar, Mutex, MutexGuard},
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use super::{Latency, Options, Summary};
use crate::{
    send::{poster::Poster, Protocol},
    {
        otlp::SpanPieces,
        spans::{OutSpan, TraceInfo},
        zipkin::SpanJson,
    },
};

/// How a process's spans are encoded for the backend: OTLP pieces under the process's
/// resource, or Zipkin JSON (each span carrying its service).
pub(crate) enum Encoder {
    Otlp(SpanPieces),
    Zipkin(SpanJson),
}

impl Encoder {
    /// The encoder for `protocol` of `ctx`'s process `process`, as it is now.
    pub(crate) fn new(protocol: Protocol, ctx: &TraceInfo, process: usize) -> Encoder {
        match protocol {
            Protocol::Otlp => Encoder::Otlp(SpanPieces::new(ctx, process)),
            Protocol::Zipkin => Encoder::Zipkin(SpanJson::new(ctx, process)),
        }
    }

    /// One span, encoded.
    pub(crate) fn span(&self, ctx: &TraceInfo, span: &OutSpan<'_>) -> Vec<u8> {
        match self {
            Encoder::Otlp(e) => e.span(ctx, span),
            Encoder::Zipkin(e) => e.span(ctx, span),
        }
    }
}

/// One span, encoded, with the encoder of its process.
pub(crate) struct Entry {
    pub(crate) process: Arc<Encoder>,
    pub(crate) bytes: Vec<u8>,
    /// When it ended, Unix ns (for the latency from end to sent).
    pub(crate) end_ns: u64,
}

struct Inner {
    items: VecDeque<(Entry, Instant)>,
    closed: bool,
    dropped: u64,
}

/// The bounded queue between the readers and the sender.
pub(crate) struct Queue {
    inner: Mutex<Inner>,
    wake: Condvar,
    bound: usize,
    batch: usize,
}

impl Queue {
    /// A queue holding at most `bound` spans, woken when `batch` are waiting.
    pub(crate) fn new(bound: usize, batch: usize) -> Arc<Queue> {
        let inner = Inner { items: VecDeque::new(), closed: false, dropped: 0 };
        Arc::new(Queue {
            inner: Mutex::new(inner),
            wake: Condvar::new(),
            bound: bound.max(1),
            batch: batch.max(1),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues a span, or drops and counts it when the queue is full; never waits.
    pub(crate) fn push(&self, entry: Entry) {
        let mut g = self.lock();
        if g.items.len() >= self.bound {
            g.dropped += 1;
            return;
        }
        g.items.push_back((entry, Instant::now()));
        if g.items.len() == self.batch {
            self.wake.notify_one();
        }
    }

    /// No more spans will come.
    pub(crate) fn close(&self) {
        self.lock().closed = true;
        self.wake.notify_all();
    }

    /// The next batch, once it is full, its oldest span has waited `delay`, or the queue is
    /// closed; `None` when it is closed and empty.
    fn next_batch(&self, delay: Duration) -> Option<Vec<Entry>> {
        let mut g = self.lock();
        loop {
            let due = g.items.front().map(|(_, at)| *at + delay);
            let now = Instant::now();
            if g.items.len() >= self.batch
                || (g.closed && !g.items.is_empty())
                || due.is_some_and(|d| d <= now)
            {
                let n = g.items.len().min(self.batch);
                return Some(g.items.drain(..n).map(|(e, _)| e).collect());
            }
            if g.closed {
                return None;
            }
            let wait = due.map_or(Duration::from_millis(100), |d| d - now);
            g = self.wake.wait_timeout(g, wait).unwrap_or_else(|e| e.into_inner()).0;
        }
    }

    /// Spans dropped so far because the queue was full.
    pub(crate) fn dropped(&self) -> u64 {
        self.lock().dropped
    }

    fn held(&self) -> usize {
        self.lock().items.len()
    }
}

/// The request of a batch: for OTLP, one piece per run of spans of one process; for Zipkin,
/// the JSON array of the spans.
fn request(batch: &[Entry]) -> Vec<u8> {
    let mut body = Vec::with_capacity(batch.iter().map(|e| e.bytes.len() + 1).sum::<usize>() + 256);
    let mut start = 0;
    for i in 1..=batch.len() {
        if i == batch.len() || !Arc::ptr_eq(&batch[i].process, &batch[start].process) {
            let spans: Vec<&[u8]> = batch[start..i].iter().map(|e| e.bytes.as_slice()).collect();
            match &*batch[start].process {
                Encoder::Otlp(pieces) => pieces.piece(&spans, &mut body),
                Encoder::Zipkin(_) => {
                    for span in spans {
                        body.push(if body.is_empty() { b'[' } else { b',' });
                        body.extend_from_slice(span);
                    }
                }
            }
            start = i;
        }
    }
    if matches!(batch.first().map(|e| &*e.process), Some(Encoder::Zipkin(_))) {
        body.push(b']');
    }
    body
}

fn now_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

/// The policy a [`Poster`] tries each request with: one attempt, since the sender's loop
/// makes the next (and says when the backend goes away).
pub(crate) fn one_attempt(options: &Options) -> super::Policy {
    let policy = &options.policy;
    super::Policy { attempts: 1, budget: policy.timeout, ..policy.clone() }
}

/// Runs the sender until the queue is closed and empty (or the stop wait is over); says on
/// `say` when the backend goes away and comes back, and when spans start being dropped.
pub(crate) fn send(
    queue: &Queue,
    mut poster: Poster,
    options: &Options,
    say: &(dyn Fn(String) + Sync),
) -> Summary {
    let mut summary = Summary::default();
    let mut latency = Latency::default();
    let mut down: Option<Instant> = None;
    let mut closing: Option<Instant> = None;
    let mut told_drops = 0;
    let mut backoff = options.policy.backoff;
    while let Some(batch) = queue.next_batch(options.batch_delay) {
        if down.is_some() && closing.is_some_and(|since| since.elapsed() >= options.stop_wait) {
            summary.unsent += batch.len() as u64;
            continue;
        }
        let body = request(&batch);
        loop {
            match poster.post(&body, batch.len()) {
                Ok(()) => {
                    backoff = options.policy.backoff;
                    let now = now_ns();
                    for e in &batch {
                        latency.add(now.saturating_sub(e.end_ns));
                    }
                    summary.sent += batch.len() as u64;
                    if let Some(since) = down.take() {
                        let gone = since.elapsed();
                        summary.down += gone;
                        say(format!(
                            "{} is back after {:.1} s; sending the {} spans held",
                            poster.target(),
                            gone.as_secs_f64(),
                            queue.held() + batch.len()
                        ));
                    }
                    break;
                }
                Err(e) if e.gave_up.is_some() => {
                    summary.retries += 1;
                    std::thread::sleep(backoff);
                    backoff = (backoff * 2).min(options.policy.max_backoff);
                    if down.is_none() {
                        down = Some(Instant::now());
                        summary.outages += 1;
                        say(format!(
                            "{} is not answering ({}); holding up to {} spans and trying again",
                            poster.target(),
                            e.error,
                            options.buffer_spans
                        ));
                    }
                    if queue.lock().closed {
                        let since = *closing.get_or_insert_with(Instant::now);
                        if since.elapsed() >= options.stop_wait {
                            summary.unsent += batch.len() as u64;
                            break;
                        }
                    }
                }
                Err(e) => {
                    say(format!("{e}; {} spans refused", batch.len()));
                    summary.refused += batch.len() as u64;
                    break;
                }
            }
        }
        let dropped = queue.dropped();
        if dropped > told_drops {
            if told_drops == 0 {
                say(format!(
                    "the buffer of {} spans is full: dropping spans (counted)",
                    options.buffer_spans
                ));
            }
            told_drops = dropped;
        }
    }
    if let Some(since) = down {
        summary.down += since.elapsed();
    }
    summary.dropped = queue.dropped();
    summary.requests = poster.report.requests as u64;
    summary.retries += poster.report.retries as u64;
    summary.rejected = poster.report.rejected;
    summary.latency = latency;
    summary
}
