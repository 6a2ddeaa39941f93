//! Where `follow`'s spans go: the span assembly of the file export, run as one pass
//! ([`OnePass`](crate::spans::one_pass::OnePass)), hands each span the moment its end is read
//! to a [`LiveWriter`], which encodes it (OTLP, or Zipkin JSON) and queues it, and (with `-o`)
//! appends it, and each event it shows, to the Chrome JSON output.

use std::sync::Arc;

use super::{
    chrome_out::ChromeOut,
    queue::{Encoder, Entry, Queue},
};
use crate::{
    send::Protocol,
    spans::{Log, OutSpan, SpanWriter, TraceInfo},
};

/// One file's spans on their way out.
pub(crate) struct LiveWriter {
    queue: Option<Arc<Queue>>,
    protocol: Protocol,
    encoder: Option<Arc<Encoder>>,
    /// The Chrome output and this file's process in it.
    out: Option<(Arc<ChromeOut>, usize)>,
    /// Whether the file's end has been read.
    pub(crate) ended: bool,
}

impl LiveWriter {
    pub(crate) fn new(queue: Option<Arc<Queue>>, protocol: Protocol, out: Option<Arc<ChromeOut>>) -> Self {
        LiveWriter { queue, protocol, encoder: None, out: out.map(|o| (o, 0)), ended: false }
    }
}

/// An event shown on `host` as the instant of its own it still is in the Chrome output.
fn instant<'a>(host: &OutSpan<'a>, log: &'a Log) -> OutSpan<'a> {
    OutSpan {
        process: host.process,
        thread: log.thread,
        id: log.id,
        callsite: &log.callsite,
        fields: &log.fields,
        start_ns: log.ts_ns,
        end_ns: log.ts_ns,
        parent: Some(host.id),
        unresolved_parent: None,
        parent_anchor: None,
        caused_by: &log.caused_by,
        links: &[],
        correlation: log.correlation,
        ended: true,
        detached: false,
        stand_in: false,
        event: true,
        referred: false,
        logs: &[],
    }
}

impl SpanWriter for LiveWriter {
    const ONE_PASS: bool = true;

    fn begin_process(&mut self, ctx: &TraceInfo, process: usize) -> std::io::Result<()> {
        if self.queue.is_some() {
            self.encoder = Some(Arc::new(Encoder::new(self.protocol, ctx, process)));
        }
        if let Some((out, p)) = &mut self.out {
            *p = out.process(&ctx.processes[process].header);
        }
        Ok(())
    }

    fn thread(&mut self, ctx: &TraceInfo, process: usize, thread: usize, named: bool) {
        let Some((out, p)) = &self.out else { return };
        if named {
            let t = &ctx.processes[process].threads[thread];
            out.thread_named(*p, thread, t.tid, &t.name);
        } else {
            out.thread(*p);
        }
    }

    fn span(&mut self, ctx: &TraceInfo, span: &OutSpan<'_>) -> std::io::Result<()> {
        if let Some((out, p)) = &self.out {
            out.span(*p, span);
            for log in span.logs {
                out.span(*p, &instant(span, log));
            }
        }
        if let (Some(encoder), Some(queue)) = (&self.encoder, &self.queue) {
            let bytes = encoder.span(ctx, span);
            queue.push(Entry { process: encoder.clone(), bytes, end_ns: span.end_ns });
        }
        Ok(())
    }

    fn end_process(&mut self, _ctx: &TraceInfo, _process: usize) -> std::io::Result<()> {
        self.ended = true;
        Ok(())
    }
}
