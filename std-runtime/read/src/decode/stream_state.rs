//! What a stream carries from one chunk to the next: its stack of open spans and entered
//! contexts, the item waiting for its links, the id the next chunk should start at; and how a
//! record's parent is found on that stack. The records of one chunk are read in `chunk.rs`.

use super::{
    fields::Fields,
    stream::{Item, Sink},
};
use crate::model::Callsite;
use std::sync::Arc;

/// What a stream has open: its spans and the contexts it entered, innermost last.
#[derive(Clone, Copy)]
pub(super) enum Open<T> {
    /// A span: its id (0 for a stand-in), begin tick and the sink's handle. For a sink not
    /// handed every item, also how many items it holds (see [`Item::held`]) and the span
    /// holding it (0: none).
    Span { id: u64, start: u64, span: T, held: u32, holder: u64 },
    /// A span entered as context (`ENTER`), by id.
    Adopted(u64),
}

impl<T> Open<T> {
    /// A span that has just begun, held by `holder` (0: none) and holding nothing yet.
    #[inline(always)]
    pub(super) fn span(id: u64, start: u64, span: T, holder: u64) -> Open<T> {
        Open::Span { id, start, span, held: 0, holder }
    }
}

/// A span begin or event not yet handed to the sink.
#[derive(Clone, Default)]
pub(super) struct Pending {
    pub(super) active: bool,
    pub(super) is_span: bool,
    pub(super) id: u64,
    pub(super) parent: Option<u64>,
    pub(super) held: bool,
    pub(super) site: u32,
    pub(super) fields: Fields,
    pub(super) ticks: u64,
    pub(super) depth: u32,
    pub(super) links: Vec<u64>,
    pub(super) correlation: Option<u64>,
    /// Where a span's entry is on the stack, to give it the sink's handle.
    pub(super) stack_pos: usize,
}

/// What one `(stream, generation)` carries from chunk to chunk.
#[derive(Clone)]
pub(super) struct StreamState<T> {
    pub(super) module: u32,
    pub(super) stack: Vec<Open<T>>,
    /// The latest span or event's id: what links and correlations attach to.
    pub(super) source: Option<u64>,
    /// The id the stream's next chunk starts at if no record is lost in between; `None` before
    /// its first chunk and after a chunk that did not decode to its end.
    pub(super) next_id: Option<u64>,
    /// The last tick seen, to end spans that never ended.
    pub(super) last_ts: u64,
    pub(super) pending: Pending,
    /// Spans begun per callsite index, of the callsites counted for the sink
    /// ([`Hand::Counted`](super::stream::Hand::Counted)).
    pub(super) begins: Vec<u64>,
}

impl<T: Copy + Default> StreamState<T> {
    pub(super) fn new() -> Self {
        StreamState {
            module: 0,
            stack: Vec::new(),
            source: None,
            next_id: None,
            last_ts: 0,
            pending: Pending::default(),
            begins: Vec::new(),
        }
    }

    /// One more span of callsite `site` began.
    #[inline]
    pub(super) fn count_begin(&mut self, site: u32) {
        match self.begins.get_mut(site as usize) {
            Some(n) => *n += 1,
            None => {
                self.begins.resize(site as usize + 1, 0);
                self.begins[site as usize] = 1;
            }
        }
    }

    /// Hands the pending item, if any, to the sink.
    #[inline]
    pub(super) fn flush<S: Sink<Span = T>>(&mut self, t: usize, sites: &[Arc<Callsite>], sink: &mut S) {
        if self.pending.active {
            self.flush_pending(t, sites, sink);
        }
    }

    fn flush_pending<S: Sink<Span = T>>(&mut self, t: usize, sites: &[Arc<Callsite>], sink: &mut S) {
        let p = &mut self.pending;
        p.active = false;
        let item = Item {
            id: p.id,
            parent: p.parent,
            held: p.held,
            callsite: &sites[p.site as usize],
            callsite_index: p.site,
            fields: &p.fields,
            ticks: p.ticks,
            depth: p.depth,
            links: &p.links,
            correlation: p.correlation,
        };
        if p.is_span {
            let handle = sink.span_begin(t, &item);
            if let Some(Open::Span { span, .. }) = self.stack.get_mut(p.stack_pos) {
                *span = handle;
            }
        } else {
            sink.event(t, &item);
        }
    }
}

/// The parent of what a stream records next (its innermost open span or entered context, or
/// for top-level records the span the process was started under), and where the open span
/// that holds it is on the stack, if one does.
#[inline(always)]
pub(super) fn parent_of<T>(stack: &[Open<T>], top: Option<u64>) -> (Option<u64>, Option<usize>) {
    match stack.last() {
        Some(Open::Span { id: 0, .. }) => (None, None),
        Some(Open::Span { id, .. }) => (Some(*id), Some(stack.len() - 1)),
        Some(Open::Adopted(id)) => (Some(*id), open_span(stack, *id)),
        None => (top, None),
    }
}

/// Where span `id` is on the stack, if it is open there.
#[cold]
pub(super) fn open_span<T>(stack: &[Open<T>], id: u64) -> Option<usize> {
    stack.iter().rposition(|o| matches!(o, Open::Span { id: i, .. } if *i == id))
}

/// The parent of what a stream records next, whether an open span of the stream holds it,
/// and the holder's id (0: none) for a span's entry. A sink not handed every item is told
/// how many items each span holds: the holder counts one more.
#[inline(always)]
pub(super) fn parent_counted<T, S: Sink<Span = T>>(
    stack: &mut [Open<T>],
    top: Option<u64>,
) -> (Option<u64>, bool, u64) {
    let (parent, holder) = parent_of(stack, top);
    if !S::EVERY_ITEM {
        if let Some(Open::Span { held, .. }) = holder.map(|i| &mut stack[i]) {
            *held = held.saturating_add(1);
        }
    }
    let holder_id = if holder.is_some() { parent.unwrap_or(0) } else { 0 };
    (parent, holder.is_some(), holder_id)
}
