//! One data chunk's records, against the state its stream carries from chunk to chunk.
//!
//! Each chunk is decodable on its own: its header gives the owner, the base timestamp, the
//! first id, the open-span depth and the records dropped before it. So a damaged or missing
//! chunk costs only itself; the depth lets the decoder close spans whose ends were lost and
//! stand in for spans whose begins were lost, keeping every later span correctly nested.
//!
//! A span begin or an event is held back (the stream's *pending* item) until a record other
//! than a link or a correlation follows it, so that the sink gets it with its causes.

use super::{Decoder, Detached, MAX_EARLY_ENDS};
use crate::decode::{
    fields::Fields,
    stream::{Hand, Item, Sink},
    stream_state::{open_span, parent_counted, Open},
};
use crate::{model::Callsite, reader::Cursor, reader::Warning};
use waffle_wire::{tag, unzigzag, ChunkHead, FieldType};

/// Stand-ins (spans whose begin was lost) one chunk header can ask for.
const MAX_STANDINS_PER_CHUNK: u64 = 1 << 16;

fn span_id(c: &mut Cursor<'_>) -> Result<u64, String> {
    Ok(u64::from_le_bytes(c.array()?))
}

/// [`Fields::read`] keeping the values, out of the loop of a sink that steps over them.
#[cold]
#[inline(never)]
fn read_kept(
    fields: &mut Fields,
    c: &mut Cursor<'_>,
    schema: &[FieldType],
    callsite: &Callsite,
) -> Result<(), String> {
    fields.read(c, schema, callsite, true)
}

#[cold]
fn unknown_callsite(seen: u64, id: u32) -> String {
    format!("record {seen} names callsite {id}, which the string table does not describe")
}

/// Where the decoding of a chunk stopped: its body's bytes read, and the running time, id and
/// record count there. A longer copy of the same chunk (the chunk itself after a TAIL copy of
/// it, see `tail.rs`) goes on from here.
#[derive(Clone, Copy, Debug)]
pub(in crate::decode) struct Resume {
    pub(in crate::decode) read: usize,
    ts: u64,
    next_id: u64,
    seen: u64,
}

impl<T: Copy + Default> Decoder<T> {
    pub(in crate::decode) fn chunk<S: Sink<Span = T>>(
        &mut self,
        stream: u32,
        body: &[u8],
        at: u64,
        sink: &mut S,
    ) -> Result<(), String> {
        self.chunk_from(stream, body, at, None, sink).map(drop)
    }

    /// Decodes the chunk `body`, or with `from`, only what it holds beyond the shorter copy of
    /// it decoded before (whose records are the first of these): its head was applied then.
    pub(in crate::decode) fn chunk_from<S: Sink<Span = T>>(
        &mut self,
        stream: u32,
        body: &[u8],
        at: u64,
        from: Option<Resume>,
        sink: &mut S,
    ) -> Result<Resume, String> {
        let (head, head_len) = ChunkHead::decode(body).map_err(|e| e.to_string())?;
        let start = from.map_or(head_len, |r| r.read.clamp(head_len, body.len()));
        let mut c = Cursor::new(&body[start..]);
        let ChunkHead { generation, base_ts: mut ts, first_id: mut next_id, depth, dropped, records } = head;
        let mut seen = 0u64;
        if let Some(r) = from {
            (ts, next_id, seen) = (r.ts, r.next_id, r.seen);
        }
        let t = self.thread(stream, generation, sink);
        let Decoder {
            threads,
            sites,
            schemas,
            hands,
            hands_any,
            callsites,
            detached,
            early_ends,
            top_parent,
            ..
        } = self;
        let (sites, top_parent, hands_any) = (&sites[..], *top_parent, *hands_any);
        let module_sites = callsites.module(threads[t].module);
        let s = &mut threads[t];
        // Links after a gap would attach to the wrong item: keep the source only if it is
        // the item just before this chunk's first id.
        let fresh = from.is_none();
        if fresh && s.source.is_some_and(|id| id.wrapping_add(1) != next_id) {
            s.flush(t, sites, sink);
            s.source = None;
        }
        // How much of the stack is certainly still open. Each lost record moved the depth by
        // at most one, so the lost records (`dropped` of them) left the bottom `depth - dropped`
        // entries alone. If more ids are missing than records were dropped, something else was
        // lost (a damaged frame) and nothing on the stack can be trusted.
        let keep = match s.next_id.take() {
            _ if !fresh => s.stack.len() as u64,
            Some(expected) if next_id.wrapping_sub(expected) <= dropped => depth.saturating_sub(dropped),
            _ => 0,
        };
        if fresh && dropped > 0 {
            sink.dropped(t, dropped);
        }
        // Spans open before the chunk that may have ended in lost records: end them where the
        // chunk starts (not marked ended).
        let wanted = if fresh { depth.min(MAX_STANDINS_PER_CHUNK) } else { 0 };
        let keep = if fresh { keep.min(depth) } else { keep };
        if s.stack.len() as u64 > keep || (s.stack.len() as u64) < wanted {
            s.flush(t, sites, sink);
        }
        while s.stack.len() as u64 > keep {
            match s.stack.pop() {
                Some(Open::Span { span, .. }) if S::EVERY_ITEM => sink.span_end(t, span, ts, false),
                _ => {}
            }
        }
        // Spans begun in lost records and still open: stand-ins keep later nesting right.
        let short = wanted.saturating_sub(s.stack.len() as u64).saturating_sub(self.standin_budget);
        if short > 0 {
            let message = format!(
                "chunk of stream {stream} claims {depth} open spans; {short} stand-ins for lost begins \
                 are not made (more than the file's size accounts for)"
            );
            self.warnings.push(Warning { path: self.path.clone(), offset: at, message });
        }
        while (s.stack.len() as u64) < wanted && self.standin_budget > 0 {
            self.standin_budget -= 1;
            let (parent, held, holder) = parent_counted::<T, S>(&mut s.stack, top_parent);
            let item = Item {
                id: 0,
                parent,
                held,
                callsite: &sites[0],
                callsite_index: 0,
                fields: &self.no_fields,
                ticks: ts,
                depth: s.stack.len() as u32,
                links: &[],
                correlation: None,
            };
            let span = sink.span_begin(t, &item);
            s.stack.push(Open::span(0, ts, span, holder));
        }
        let first_id = next_id;
        // Items not handed to a sink that is not handed every item.
        let (mut skipped_spans, mut skipped_events) = (0u64, 0u64);
        let mut early_ends_full = false;
        let result = (|| {
            while !c.is_empty() {
                let record_tag = c.byte()?;
                match record_tag {
                    tag::SPAN_BEGIN | tag::EVENT => {
                        let id = c.varint_u32()?;
                        ts = ts.wrapping_add(unzigzag(c.varint()?) as u64);
                        let Some(site) = module_sites.get(id) else {
                            return Err(unknown_callsite(seen, id));
                        };
                        s.flush(t, sites, sink);
                        let callsite = &sites[site as usize];
                        let is_span = record_tag == tag::SPAN_BEGIN;
                        // Every span of this callsite asked for, or counted (by a sink not handed
                        // every item)?
                        let hand = if !hands_any {
                            Hand::Referring
                        } else {
                            match hands[site as usize] {
                                Hand::Every => Hand::Every,
                                _ if S::EVERY_ITEM || !is_span => Hand::Referring,
                                hand => hand,
                            }
                        };
                        if hand == Hand::Counted {
                            s.count_begin(site);
                        }
                        let schema = &schemas[site as usize];
                        let with_fields = matches!(hand, Hand::SpansWithFields | Hand::Every);
                        if !S::FIELDS && with_fields {
                            // Rare: the values are kept for a sink that otherwise steps over them.
                            read_kept(&mut s.pending.fields, &mut c, schema, callsite)?;
                        } else {
                            s.pending.fields.read(&mut c, schema, callsite, S::FIELDS)?;
                        }
                        let (parent, held, holder) = parent_counted::<T, S>(&mut s.stack, top_parent);
                        let depth = s.stack.len();
                        s.source = Some(next_id);
                        let id = next_id;
                        next_id = next_id.wrapping_add(1);
                        seen += 1;
                        // Links and a correlation follow their item: it waits for them (to the
                        // next chunk, if it is the last record of this one). Without, it is
                        // handed over now.
                        if matches!(c.peek(), Some(tag::LINK_LOCAL | tag::LINK_FULL | tag::CORRELATE) | None)
                        {
                            let p = &mut s.pending;
                            (p.active, p.is_span, p.id, p.parent, p.held, p.site, p.ticks) =
                                (true, is_span, id, parent, held, site, ts);
                            (p.depth, p.correlation, p.stack_pos) = (depth as u32, None, depth);
                            p.links.clear();
                            if is_span {
                                s.stack.push(Open::span(id, ts, T::default(), holder));
                            }
                            continue;
                        }
                        // An item that refers nowhere, for a sink that does not want those:
                        // counted, and kept on the stack if it is a span.
                        if !S::EVERY_ITEM && (held || parent.is_none()) && !with_fields {
                            if is_span {
                                skipped_spans += 1;
                                s.stack.push(Open::span(id, ts, T::default(), holder));
                            } else {
                                skipped_events += 1;
                            }
                            continue;
                        }
                        let item = Item {
                            id,
                            parent,
                            held,
                            callsite,
                            callsite_index: site,
                            fields: &s.pending.fields,
                            ticks: ts,
                            depth: depth as u32,
                            links: &[],
                            correlation: None,
                        };
                        if is_span {
                            let span = sink.span_begin(t, &item);
                            s.stack.push(Open::span(id, ts, span, holder));
                        } else {
                            sink.event(t, &item);
                        }
                        continue;
                    }
                    tag::SPAN_END => {
                        s.flush(t, sites, sink);
                        ts = ts.wrapping_add(unzigzag(c.varint()?) as u64);
                        // The innermost open span; an entered context left open is abandoned.
                        while let Some(open) = s.stack.pop() {
                            if let Open::Span { span, .. } = open {
                                if S::EVERY_ITEM {
                                    sink.span_end(t, span, ts, true);
                                }
                                break;
                            }
                        }
                    }
                    tag::LINK_LOCAL | tag::LINK_FULL => {
                        let target = if record_tag == tag::LINK_LOCAL {
                            let delta = c.varint()?;
                            s.source.map_or(0, |id| id.wrapping_sub(delta))
                        } else {
                            span_id(&mut c)?
                        };
                        if s.pending.active {
                            s.pending.links.push(target);
                        } else if s.source.is_some() {
                            sink.late_link(t, target);
                        }
                    }
                    tag::CORRELATE => {
                        let value = c.varint()?;
                        if s.pending.active {
                            s.pending.correlation = Some(value);
                        } else if s.source.is_some() {
                            sink.late_correlation(t, value);
                        }
                    }
                    tag::ENTER => {
                        s.flush(t, sites, sink);
                        s.stack.push(Open::Adopted(span_id(&mut c)?));
                    }
                    tag::EXIT => {
                        s.flush(t, sites, sink);
                        if let Some(pos) = s.stack.iter().rposition(|o| matches!(o, Open::Adopted(_))) {
                            s.stack.remove(pos);
                        }
                    }
                    tag::DETACH => {
                        s.flush(t, sites, sink);
                        let id = span_id(&mut c)?;
                        let pos = open_span(&s.stack, id);
                        if let Some(Open::Span { start, span, held, holder, .. }) =
                            pos.map(|pos| s.stack.remove(pos))
                        {
                            sink.detach(t, span, id);
                            if !S::EVERY_ITEM {
                                // Its holder, if still open here, no longer holds it.
                                let at = (holder != 0).then(|| open_span(&s.stack, holder)).flatten();
                                if let Some(Open::Span { held, .. }) = at.map(|i| &mut s.stack[i]) {
                                    *held = held.saturating_sub(1);
                                }
                                sink.detached_from(t, id, held, at.map(|_| holder));
                            }
                            if let Some(end) = early_ends.remove(&id) {
                                sink.detached_end(t, span, end.max(start), true);
                            } else if let Some(old) = detached.insert(id, Detached { thread: t, start, span })
                            {
                                // Two detached spans with one id (a damaged or forged file): the
                                // first cannot be told from the second, so it ends here.
                                sink.detached_end(old.thread, old.span, ts.max(old.start), false);
                            }
                        }
                    }
                    tag::ASYNC_END => {
                        s.flush(t, sites, sink);
                        ts = ts.wrapping_add(unzigzag(c.varint()?) as u64);
                        let id = span_id(&mut c)?;
                        if let Some(d) = detached.remove(&id) {
                            sink.detached_end(d.thread, d.span, ts.max(d.start), true);
                        } else if early_ends.len() < MAX_EARLY_ENDS || early_ends.contains_key(&id) {
                            early_ends.insert(id, ts);
                        } else {
                            early_ends_full = true;
                        }
                    }
                    other => return Err(format!("record {seen} has unknown tag 0x{other:02x}")),
                }
                seen += 1;
            }
            Ok(())
        })();
        s.last_ts = s.last_ts.max(ts);
        s.next_id = result.is_ok().then_some(next_id);
        if !S::EVERY_ITEM {
            sink.skipped(t, (first_id, next_id), skipped_spans, skipped_events);
        }
        if early_ends_full && !self.early_ends_warned {
            self.early_ends_warned = true;
            let message = format!(
                "more than {MAX_EARLY_ENDS} ends of async spans name spans not (yet) detached; \
                 the ends beyond them are ignored"
            );
            self.warnings.push(Warning { path: self.path.clone(), offset: at, message });
        }
        result?;
        if seen != records {
            return Err(format!("header says {records} records but {seen} were read"));
        }
        Ok(Resume { read: body.len(), ts, next_id, seen })
    }
}
