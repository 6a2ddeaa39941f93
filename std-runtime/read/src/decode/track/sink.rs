//! [`Tracks`] as the sink between the decoder and every other: records of threads passed on,
//! a track's definitions and syncs kept (and handed on only to a sink that keeps them), its
//! slices held until the file is read.

use super::*;

impl<S: Sink> Sink for Tracks<'_, S> {
    type Span = S::Span;
    const FIELDS: bool = S::FIELDS;
    const EVERY_ITEM: bool = S::EVERY_ITEM;
    const EAGER_TAILS: bool = S::EAGER_TAILS;
    const TRACK_RECORDS: bool = S::TRACK_RECORDS;

    fn hand(&mut self, index: u32, callsite: &Arc<Callsite>) -> Hand {
        match self.role(index, callsite) {
            Role::Plain => self.inner.hand(index, callsite),
            _ => Hand::Every,
        }
    }

    fn process(&mut self, source: &str, header: &Header) {
        self.cal = Some(header.calibration);
        self.inner.process(source, header);
    }

    fn thread(&mut self, thread: usize, stream: u32) {
        self.last.push(Latest::Inner);
        self.inner.thread(thread, stream);
    }

    fn thread_named(&mut self, thread: usize, tid: u64, name: &str) {
        self.inner.thread_named(thread, tid, name);
    }

    fn span_begin(&mut self, thread: usize, span: &Item<'_>) -> S::Span {
        self.last[thread] = Latest::Inner;
        self.top_index = self.top_index.max(span.callsite_index);
        self.inner.span_begin(thread, span)
    }

    fn event(&mut self, thread: usize, e: &Item<'_>) {
        self.last[thread] = Latest::Inner;
        let role = self.role(e.callsite_index, e.callsite);
        match role {
            Role::Slice if self.hold(thread, e) => return,
            Role::Define => {
                let mut values = e.fields.iter();
                if let (Some(FieldValue::Str(name)), Some(rate)) = (values.next(), unsigned(values.next())) {
                    self.defined.push((e.id, name.to_owned(), rate));
                }
            }
            Role::Sync => {
                let mut values = e.fields.iter();
                if let (Some(track), Some(device_ticks)) = (unsigned(values.next()), unsigned(values.next()))
                {
                    self.syncs.entry(track).or_default().push(SyncPoint { device_ticks, host: e.ticks });
                }
            }
            _ => {}
        }
        if S::TRACK_RECORDS || !matches!(role, Role::Define | Role::Sync) {
            self.inner.event(thread, e);
        } else {
            self.last[thread] = Latest::Kept;
        }
    }

    fn span_end(&mut self, thread: usize, span: S::Span, ticks: u64, ended: bool) {
        self.inner.span_end(thread, span, ticks, ended);
    }

    fn detach(&mut self, thread: usize, span: S::Span, id: u64) {
        self.inner.detach(thread, span, id);
    }

    fn detached_end(&mut self, thread: usize, span: S::Span, ticks: u64, ended: bool) {
        self.inner.detached_end(thread, span, ticks, ended);
    }

    fn skipped(&mut self, thread: usize, ids: (u64, u64), spans: u64, events: u64) {
        self.inner.skipped(thread, ids, spans, events);
    }

    fn detached_from(&mut self, thread: usize, id: u64, items: u32, holder: Option<u64>) {
        self.inner.detached_from(thread, id, items, holder);
    }

    fn counted(&mut self, thread: usize, index: u32, spans: u64) {
        self.inner.counted(thread, index, spans);
    }

    fn late_link(&mut self, thread: usize, target: u64) {
        match self.last[thread] {
            Latest::Held(i) => self.held[i].links.push(target),
            Latest::Inner => self.inner.late_link(thread, target),
            Latest::Kept => {}
        }
    }

    fn late_correlation(&mut self, thread: usize, value: u64) {
        match self.last[thread] {
            Latest::Held(i) => self.held[i].correlation = Some(value),
            Latest::Inner => self.inner.late_correlation(thread, value),
            Latest::Kept => {}
        }
    }

    fn dropped(&mut self, thread: usize, records: u64) {
        self.inner.dropped(thread, records);
    }

    fn calibration(&mut self, calibration: Calibration) {
        self.cal = Some(calibration);
        self.inner.calibration(calibration);
    }

    fn device_track(&mut self, thread: usize, track: &Track) {
        self.inner.device_track(thread, track);
    }

    fn finish(&mut self, end: &FileEnd) {
        self.emit();
        self.inner.finish(end);
    }
}
