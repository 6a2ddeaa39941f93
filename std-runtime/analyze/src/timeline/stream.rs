//! Files read into the builder as a stream of records: a decoder [`Sink`] that keeps each span
//! compact (ticks until the file is read, then times on its last calibration), the receive
//! events and the other events' ids and times, and applies correlations and links recorded
//! after their item to it. Field values are decoded only for the callsites whose fields the
//! lanes keep.

use std::{path::Path, sync::Arc};

use waffle_wire::Calibration;

use super::{
    build::{Builder, Site, Sites},
    At, Extra, Received,
};
use crate::{
    decode::{
        run::decode_path,
        stream::{FileEnd, Hand, Header, Item, Sink},
        FieldValue,
    },
    model::Callsite,
    reader::Warning,
    Error,
};

pub(crate) fn field_int(v: Option<FieldValue<'_>>) -> Option<i64> {
    match v? {
        FieldValue::I64(i) => Some(i),
        FieldValue::U64(u) => i64::try_from(u).ok(),
        _ => None,
    }
}

pub(crate) fn field_text(v: Option<FieldValue<'_>>) -> Option<String> {
    match v? {
        FieldValue::Str(s) => Some(s.to_owned()),
        _ => None,
    }
}

/// What a thread's latest item was, for a correlation or link recorded after it.
#[derive(Clone, Copy)]
enum Last {
    None,
    Span(At),
    Received(usize),
}

/// One file read into the builder.
struct FileSink<'b> {
    b: &'b mut Builder,
    process: usize,
    sites: Sites,
    lanes: Vec<u32>,
    stacks: Vec<Vec<u32>>,
    last: Vec<Last>,
    cal: Option<Calibration>,
    first_lane: usize,
    last_ticks: u64,
    converted: bool,
}

impl FileSink<'_> {
    fn site(&mut self, index: u32, cs: &Arc<Callsite>) -> Site {
        self.sites.get(self.b, index, cs)
    }

    fn seen(&mut self, ticks: u64) {
        self.last_ticks = self.last_ticks.max(ticks);
    }
}

impl Sink for FileSink<'_> {
    type Span = At;
    const FIELDS: bool = false;

    fn hand(&mut self, index: u32, callsite: &Arc<Callsite>) -> Hand {
        if self.site(index, callsite).has_fields() {
            Hand::Every
        } else {
            Hand::Referring
        }
    }

    fn process(&mut self, source: &str, header: &Header) {
        self.process = self.b.process(source, header);
        self.cal = Some(header.calibration);
        self.first_lane = self.b.run.lanes.len();
        self.last_ticks = header.calibration.anchor_ticks;
    }

    fn thread(&mut self, thread: usize, _stream: u32) {
        let lane = self.b.lane(self.process, thread);
        self.lanes.push(lane);
        self.stacks.push(Vec::new());
        self.last.push(Last::None);
    }

    fn thread_named(&mut self, _thread: usize, _tid: u64, _name: &str) {}

    fn span_begin(&mut self, thread: usize, r: &Item<'_>) -> At {
        self.seen(r.ticks);
        let site = self.site(r.callsite_index, r.callsite);
        let got = site.read(|k| field_int(r.fields.iter().nth(k)), |k| field_text(r.fields.iter().nth(k)));
        let parent = if r.held { self.stacks[thread].last().copied() } else { None };
        let at = self.b.span(self.lanes[thread], &site, (r.id, r.ticks, r.correlation, parent), got, r.links);
        self.stacks[thread].push(at.span);
        self.last[thread] = Last::Span(at);
        at
    }

    fn event(&mut self, thread: usize, r: &Item<'_>) {
        self.seen(r.ticks);
        let lane = self.lanes[thread];
        self.b.run.lanes[lane as usize].events.push((r.id, r.ticks));
        self.last[thread] = Last::None;
        let site = self.site(r.callsite_index, r.callsite);
        let top = self.stacks[thread].last().copied();
        let (true, true, Some(span)) = (site.received, r.held, top) else { return };
        let got = site.read(|k| field_int(r.fields.iter().nth(k)), |_| None);
        let received =
            Received { at: At { lane, span }, value: r.correlation.unwrap_or(0), request: got.request };
        self.b.received.push(received);
        self.last[thread] = Last::Received(self.b.received.len() - 1);
    }

    fn span_end(&mut self, thread: usize, span: At, ticks: u64, _ended: bool) {
        self.seen(ticks);
        let stack = &mut self.stacks[thread];
        if let Some(pos) = stack.iter().rposition(|&s| s == span.span) {
            stack.remove(pos);
        }
        self.b.run.lanes[span.lane as usize].spans[span.span as usize].end_ns = ticks;
    }

    fn detach(&mut self, thread: usize, span: At, _id: u64) {
        let stack = &mut self.stacks[thread];
        if let Some(pos) = stack.iter().rposition(|&s| s == span.span) {
            stack.remove(pos);
        }
    }

    fn detached_end(&mut self, _thread: usize, span: At, ticks: u64, _ended: bool) {
        self.seen(ticks);
        self.b.run.lanes[span.lane as usize].spans[span.span as usize].end_ns = ticks;
    }

    fn late_link(&mut self, thread: usize, target: u64) {
        let Last::Span(at) = self.last[thread] else { return };
        let run = &mut self.b.run;
        let s = &mut run.lanes[at.lane as usize].spans[at.span as usize];
        if s.extra == u32::MAX {
            run.extras.push(Extra::default());
            s.extra = run.extras.len() as u32 - 1;
        }
        run.extras[s.extra as usize].links.push(target);
    }

    fn late_correlation(&mut self, thread: usize, value: u64) {
        match self.last[thread] {
            Last::Span(at) => self.b.run.lanes[at.lane as usize].spans[at.span as usize].value = value,
            Last::Received(k) => self.b.received[k].value = value,
            Last::None => {}
        }
    }

    fn calibration(&mut self, calibration: Calibration) {
        self.cal = Some(calibration);
    }

    fn finish(&mut self, end: &FileEnd) {
        self.convert(end.complete);
    }
}

impl FileSink<'_> {
    /// The file is read (`complete`: to its clean end): its ticks become times, every one on
    /// its last calibration.
    fn convert(&mut self, complete: bool) {
        if std::mem::replace(&mut self.converted, true) {
            return;
        }
        let Some(cal) = self.cal else { return };
        let c = cal.converter();
        for lane in &mut self.b.run.lanes[self.first_lane..] {
            for s in &mut lane.spans {
                (s.start_ns, s.end_ns) = (c.to_unix_ns(s.start_ns), c.to_unix_ns(s.end_ns));
            }
            for e in &mut lane.events {
                e.1 = c.to_unix_ns(e.1);
            }
        }
        let facts = &mut self.b.run.processes[self.process];
        (facts.complete, facts.last_ns) = (complete, c.to_unix_ns(self.last_ticks));
    }
}

/// Reads `paths` into the builder, one file after the other; the warnings of the reading.
pub(super) fn read_files<P: AsRef<Path>>(b: &mut Builder, paths: &[P]) -> Result<Vec<Warning>, Error> {
    let mut warnings = Vec::new();
    for path in paths {
        let mut sink = FileSink {
            b: &mut *b,
            process: 0,
            sites: Sites::default(),
            lanes: Vec::new(),
            stacks: Vec::new(),
            last: Vec::new(),
            cal: None,
            first_lane: 0,
            last_ticks: 0,
            converted: false,
        };
        warnings.extend(decode_path(path.as_ref(), &mut sink)?);
        // A file cut short may end without its end being told.
        sink.convert(false);
    }
    Ok(warnings)
}
