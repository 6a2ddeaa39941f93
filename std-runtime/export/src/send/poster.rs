//! A backend posted to for as long as a program runs (`follow`): one request at a time, each
//! tried as a [`Policy`] says, over one client that keeps its connection, the totals kept
//! across requests.

use std::time::Instant;

use super::{http, sender::Sender, Endpoint, Policy, Report, SendError};

/// Posts batches to one backend, one after the other.
pub(crate) struct Poster {
    client: Option<http::Client>,
    target: Endpoint,
    policy: Policy,
    /// What every request so far did.
    pub(crate) report: Report,
    started: Instant,
}

impl Poster {
    /// A poster to `target`, trying each request as `policy` says.
    pub(crate) fn new(target: Endpoint, policy: Policy) -> Poster {
        Poster {
            client: Some(http::Client::new()),
            target,
            policy,
            report: Report::default(),
            started: Instant::now(),
        }
    }

    /// Where to.
    pub(crate) fn target(&self) -> &Endpoint {
        &self.target
    }

    /// Posts one request of `spans` spans; on failure, says why (a failure with
    /// [`SendError::gave_up`] set may succeed later, one without will not).
    pub(crate) fn post(&mut self, body: &[u8], spans: usize) -> Result<(), Box<SendError>> {
        let mut sender = Sender {
            client: self.client.take().unwrap_or_else(http::Client::new),
            target: &self.target,
            policy: &self.policy,
            report: std::mem::take(&mut self.report),
            started: self.started,
            failed: None,
            body: Vec::new(),
            count: 0,
        };
        let result = sender.post_once(body, spans);
        self.client = Some(sender.client);
        self.report = sender.report;
        self.report.elapsed = self.started.elapsed();
        result
    }
}
