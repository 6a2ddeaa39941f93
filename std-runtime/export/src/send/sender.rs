//! One send in progress: batches posted one request each, tried again as the policy allows,
//! and what the server's answers say.

use std::time::Instant;

use super::{
    answer::{self, Verdict},
    http, parse_retry_after, Endpoint, GiveUp, Policy, Report, SendError,
};

/// One send in progress.
pub(super) struct Sender<'a> {
    pub(super) client: http::Client,
    pub(super) target: &'a Endpoint,
    pub(super) policy: &'a Policy,
    pub(super) report: Report,
    pub(super) started: Instant,
    /// Why the send stopped, when a batch could not be sent.
    pub(super) failed: Option<Box<SendError>>,
    /// Zipkin: the JSON array of the batch being made, and its span count.
    pub(super) body: Vec<u8>,
    pub(super) count: usize,
}

impl<'a> Sender<'a> {
    /// Zipkin's spans one at a time, posted `max` to a request.
    pub(super) fn zipkin<'s>(
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
    pub(super) fn post_zipkin_batch(&mut self) -> Result<(), Box<SendError>> {
        self.body.push(b']');
        let body = std::mem::take(&mut self.body);
        let sent = self.post_once(&body, self.count);
        (self.body, self.count) = (body, 0);
        self.body.clear();
        sent
    }

    /// Posts one batch, or keeps why it could not be and stops the walk.
    pub(super) fn post(&mut self, body: &[u8], spans: usize) -> std::io::Result<()> {
        self.post_once(body, spans).map_err(|e| self.stop(e))
    }

    /// Keeps the failure; what stops the walk.
    pub(super) fn stop(&mut self, failure: Box<SendError>) -> std::io::Error {
        self.failed = Some(failure);
        std::io::Error::other("the send stopped")
    }

    /// Posts one batch of `spans` spans, trying again as the policy allows.
    pub(super) fn post_once(&mut self, body: &[u8], spans: usize) -> Result<(), Box<SendError>> {
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

    pub(super) fn accepted(&mut self, answer: &http::Answer, spans: usize) {
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

    pub(super) fn error(
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
