//! The profile's files read as a stream of records straight into their tallies: no span is
//! kept once it has ended, and field values are decoded only for the callsites the profile and
//! the checks of a whole run read (MPI calls naming other ranks, received messages).

use std::{path::Path, sync::Arc};

use waffle_wire::Calibration;

use super::tally::{FileTally, Handle};
use crate::{
    decode::{
        run::decode_path,
        stream::{FileEnd, Hand, Header, Item, Sink},
    },
    model::Callsite,
    reader::Warning,
    timeline::{field_int, field_text, Builder, Site, Sites, MPI},
    Error,
};

/// One file read into its tally; the builder keeps what the checks of a whole run read.
struct FileSink<'b> {
    b: &'b mut Builder,
    tally: FileTally,
    process: usize,
    sites: Sites,
    stacks: Vec<Vec<Handle>>,
    cal: Option<Calibration>,
    last_ticks: u64,
    complete: bool,
    done: bool,
}

impl FileSink<'_> {
    fn site(&mut self, index: u32, cs: &Arc<Callsite>) -> Site {
        self.sites.get(self.b, index, cs)
    }

    fn ends(&mut self, thread: usize, h: Handle, ticks: u64) {
        self.last_ticks = self.last_ticks.max(ticks);
        let stack = &mut self.stacks[thread];
        if let Some(pos) = stack.iter().rposition(|&s| s == h) {
            stack.remove(pos);
        }
        self.tally.end(h, ticks);
    }

    /// The file is read (`complete`: to its clean end).
    fn finish(&mut self, complete: bool) -> Option<super::tally::Tallied> {
        if std::mem::replace(&mut self.done, true) {
            return None;
        }
        let tallied = std::mem::take(&mut self.tally).finish(self.cal, self.stacks.len());
        let last = self.cal.map_or(self.last_ticks, |c| c.to_unix_ns(self.last_ticks));
        let facts = &mut self.b.run.processes[self.process];
        (facts.complete, facts.last_ns, facts.times) = (complete, last, tallied.times);
        Some(tallied)
    }
}

impl Sink for FileSink<'_> {
    type Span = Handle;
    const FIELDS: bool = false;

    fn hand(&mut self, index: u32, callsite: &Arc<Callsite>) -> Hand {
        let s = self.site(index, callsite);
        if s.names_ranks() || s.received {
            Hand::Every
        } else {
            Hand::Referring
        }
    }

    fn process(&mut self, source: &str, header: &Header) {
        self.process = self.b.process(source, header);
        self.cal = Some(header.calibration);
        self.last_ticks = header.calibration.anchor_ticks;
    }

    fn thread(&mut self, _thread: usize, _stream: u32) {
        self.stacks.push(Vec::new());
    }

    fn thread_named(&mut self, _thread: usize, _tid: u64, _name: &str) {}

    fn span_begin(&mut self, thread: usize, r: &Item<'_>) -> Handle {
        self.last_ticks = self.last_ticks.max(r.ticks);
        let site = self.site(r.callsite_index, r.callsite);
        if site.names_ranks() {
            let got =
                site.read(|k| field_int(r.fields.iter().nth(k)), |k| field_text(r.fields.iter().nth(k)));
            self.b.named(self.process, &site, &got);
        }
        let parent = if r.held { self.stacks[thread].last().copied() } else { None };
        let h = self.tally.begin(parent, r.ticks, site.name, site.kind & MPI != 0);
        self.stacks[thread].push(h);
        h
    }

    fn event(&mut self, thread: usize, r: &Item<'_>) {
        self.last_ticks = self.last_ticks.max(r.ticks);
        let site = self.site(r.callsite_index, r.callsite);
        if !(site.received && r.held && !self.stacks[thread].is_empty()) {
            return;
        }
        let got = site.read(|k| field_int(r.fields.iter().nth(k)), |_| None);
        if let Some(from) = got.from {
            self.tally.received(from, got.bytes);
        }
    }

    fn span_end(&mut self, thread: usize, span: Handle, ticks: u64, _ended: bool) {
        self.ends(thread, span, ticks);
    }

    fn detach(&mut self, thread: usize, span: Handle, _id: u64) {
        let stack = &mut self.stacks[thread];
        if let Some(pos) = stack.iter().rposition(|&s| s == span) {
            stack.remove(pos);
        }
    }

    fn detached_end(&mut self, thread: usize, span: Handle, ticks: u64, _ended: bool) {
        self.ends(thread, span, ticks);
    }

    fn calibration(&mut self, calibration: Calibration) {
        self.cal = Some(calibration);
    }

    fn finish(&mut self, end: &FileEnd) {
        self.complete = end.complete;
    }
}

/// Reads `paths` into the builder's facts and a tally each, one file after the other; the
/// tallies, in file order, and the warnings of the reading.
pub(super) fn read_files<P: AsRef<Path>>(
    b: &mut Builder,
    paths: &[P],
) -> Result<(Vec<super::tally::Tallied>, Vec<Warning>), Error> {
    let (mut tallies, mut warnings) = (Vec::new(), Vec::new());
    for path in paths {
        let mut sink = FileSink {
            b: &mut *b,
            tally: FileTally::default(),
            process: 0,
            sites: Sites::default(),
            stacks: Vec::new(),
            cal: None,
            last_ticks: 0,
            complete: false,
            done: false,
        };
        warnings.extend(decode_path(path.as_ref(), &mut sink)?);
        tallies.extend(sink.finish(sink.complete));
    }
    Ok((tallies, warnings))
}
