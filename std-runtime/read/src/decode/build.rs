//! The model builder: a [`Sink`] that keeps every span and event of a file as a
//! [`Process`].
//!
//! Spans keep their ticks until the file is read, then are converted with the last valid
//! calibration (a CLOCK frame written at stop refines the header's for every timestamp).

use super::stream::{FileEnd, Header, Item as Record, Sink};
use crate::model::{Event, Item, Process, Span, Thread, Track};
use waffle_wire::Calibration;

/// Builds a [`Process`] from a file's records.
#[derive(Default)]
pub(super) struct Builder {
    process: Option<Process>,
    cal: Option<Calibration>,
    /// Per thread, its latest span or event: what a late link or correlation belongs to.
    last: Vec<Option<Item>>,
    dropped_end: u64,
    /// The latest tick reading of any record (span ends included).
    last_ticks: u64,
    /// Whether a CLOCK frame was read.
    clocked: bool,
}

impl Builder {
    fn threads(&mut self) -> &mut Vec<Thread> {
        &mut self.process.as_mut().expect("the header comes first").threads
    }

    /// The process, its ticks converted to Unix nanoseconds.
    pub(super) fn into_process(self) -> Process {
        let mut process = self.process.expect("the header comes first");
        let cal = self.cal.expect("the header comes first");
        let mut thread_drops = 0u64;
        for t in &mut process.threads {
            thread_drops = t.dropped.saturating_add(thread_drops);
            for s in &mut t.spans {
                s.start_ns = cal.to_unix_ns(s.start_ns);
                s.end_ns = cal.to_unix_ns(s.end_ns).max(s.start_ns);
            }
            for e in &mut t.events {
                e.ts_ns = cal.to_unix_ns(e.ts_ns);
            }
        }
        for s in process.tracks.iter_mut().flat_map(|t| &mut t.syncs) {
            s.host = cal.to_unix_ns(s.host);
        }
        process.dropped = thread_drops.max(self.dropped_end);
        // A CLOCK frame is measured from the anchor to the stop: its interval's end is the
        // last moment the recorder vouches for, even when no record came that late.
        let measured = if self.clocked { cal.anchor_unix_ns.saturating_add(cal.ns) } else { 0 };
        process.last_ns = cal.to_unix_ns(self.last_ticks).max(measured);
        process
    }
}

impl Sink for Builder {
    /// Index into the thread's spans.
    type Span = usize;
    /// The model says what the file holds: a device track's definition and syncs too.
    const TRACK_RECORDS: bool = true;

    fn process(&mut self, source: &str, h: &Header) {
        self.cal = Some(h.calibration);
        self.process = Some(Process {
            source: source.to_owned(),
            header: h.clone(),
            threads: Vec::new(),
            dropped: 0,
            complete: false,
            last_ns: 0,
            tracks: Vec::new(),
        });
        self.last_ticks = h.calibration.anchor_ticks;
    }

    fn thread(&mut self, _thread: usize, stream: u32) {
        let thread =
            Thread { stream, tid: 0, name: String::new(), spans: vec![], events: vec![], dropped: 0 };
        self.threads().push(thread);
        self.last.push(None);
    }

    fn thread_named(&mut self, thread: usize, tid: u64, name: &str) {
        let t = &mut self.threads()[thread];
        t.tid = tid;
        name.clone_into(&mut t.name);
    }

    fn span_begin(&mut self, thread: usize, r: &Record<'_>) -> usize {
        self.last_ticks = self.last_ticks.max(r.ticks);
        let spans = &mut self.threads()[thread].spans;
        let i = spans.len();
        spans.push(Span {
            id: r.id,
            parent: r.parent,
            links: r.links.to_vec(),
            correlation: r.correlation,
            detached: false,
            depth: r.depth,
            callsite: r.callsite.clone(),
            fields: r.fields.to_values(),
            start_ns: r.ticks,
            end_ns: r.ticks,
            ended: false,
        });
        if r.id != 0 {
            self.last[thread] = Some(Item::Span(i));
        }
        i
    }

    fn event(&mut self, thread: usize, r: &Record<'_>) {
        self.last_ticks = self.last_ticks.max(r.ticks);
        let events = &mut self.threads()[thread].events;
        events.push(Event {
            id: r.id,
            parent: r.parent,
            links: r.links.to_vec(),
            correlation: r.correlation,
            callsite: r.callsite.clone(),
            fields: r.fields.to_values(),
            ts_ns: r.ticks,
        });
        self.last[thread] = Some(Item::Event(events.len() - 1));
    }

    fn span_end(&mut self, thread: usize, span: usize, ticks: u64, ended: bool) {
        self.last_ticks = self.last_ticks.max(ticks);
        let s = &mut self.threads()[thread].spans[span];
        (s.end_ns, s.ended) = (ticks, ended);
    }

    fn detach(&mut self, thread: usize, span: usize, _id: u64) {
        self.threads()[thread].spans[span].detached = true;
    }

    fn detached_end(&mut self, thread: usize, span: usize, ticks: u64, ended: bool) {
        self.span_end(thread, span, ticks, ended);
    }

    fn late_link(&mut self, thread: usize, target: u64) {
        match self.last[thread] {
            Some(Item::Span(i)) => self.threads()[thread].spans[i].links.push(target),
            Some(Item::Event(i)) => self.threads()[thread].events[i].links.push(target),
            None => {}
        }
    }

    fn late_correlation(&mut self, thread: usize, value: u64) {
        match self.last[thread] {
            Some(Item::Span(i)) => self.threads()[thread].spans[i].correlation = Some(value),
            Some(Item::Event(i)) => self.threads()[thread].events[i].correlation = Some(value),
            None => {}
        }
    }

    fn dropped(&mut self, thread: usize, records: u64) {
        let t = &mut self.threads()[thread];
        t.dropped = t.dropped.saturating_add(records);
    }

    fn calibration(&mut self, cal: Calibration) {
        self.cal = Some(cal);
        self.clocked = true;
    }

    fn device_track(&mut self, _thread: usize, track: &Track) {
        self.process.as_mut().expect("the header comes first").tracks.push(track.clone());
    }

    fn finish(&mut self, end: &FileEnd) {
        self.dropped_end = end.dropped;
        self.process.as_mut().expect("the header comes first").complete = end.complete;
    }
}
