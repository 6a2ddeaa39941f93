//! What ties an item to others, written on its packet: the flows it starts and ends (links,
//! parents that do not hold it on its track, correlation groups, arrows from the causes to the
//! effects of directed ones, matching by order) and the
//! annotations that spell them out. Rare, so out of the writer's line.

use super::PacketWriter;
use crate::{
    decode::{stream::Item, FieldValue},
    perfetto::{order::OrderSite, plan::Met, put::Tag, sequence::Special},
};

/// The flow ids and causal annotations of the item being written.
#[derive(Default)]
pub(super) struct Causal {
    out: Vec<u64>,
    into: Vec<u64>,
    /// The text of an annotation being made, UTF-8 built from bytes: ids in hex, or a
    /// correlation's key (a `str`), `=` and its value in decimal.
    text: Vec<u8>,
}

impl PacketWriter<'_> {
    /// Ends the packet of `r` begun by the caller: its causal annotations, then the rest of
    /// its event with its flows (gathered in `self.causal`).
    #[cold]
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    pub(super) fn causal(
        &mut self,
        t: usize,
        r: &Item<'_>,
        at_ns: u64,
        kind: i32,
        name: Tag,
        track: Option<u64>,
        target: Option<usize>,
        matched: Option<OrderSite>,
    ) {
        let detached = track.is_some();
        let PacketWriter { plan, seqs, ev, causal, met, touched, found, keys, large, .. } = self;
        let seq = &mut seqs[t];
        let (out, into) = (&mut causal.out, &mut causal.into);
        out.clear();
        into.clear();
        // Causes: this item starts the flows of those that refer to it.
        let mut is_cause = false;
        if let Some(i) = target {
            let tg = &plan.targets[i];
            let m = meet(met, touched, i);
            if !m.written {
                m.written = true;
                out.extend((0..u64::from(tg.links)).map(|k| tg.link_base + k));
                out.extend((0..u64::from(tg.children)).map(|k| tg.child_base + k));
                is_cause = tg.links > 0;
            }
        }
        if is_cause {
            causal.text.clear();
            hex(&mut causal.text, r.id);
            let iid = seq.special(Special::Id, ev);
            ev.text_annotation(iid, &causal.text);
        }
        // Effects: it ends a flow from each cause in the trace, once per cause.
        let mut unresolved = 0u64;
        for (k, &cause) in r.links.iter().enumerate() {
            if cause == r.id || r.links[..k].contains(&cause) {
                continue;
            }
            match plan.target(cause, seq.cursor, found) {
                Some(i) if met[i].links < plan.targets[i].links => {
                    let m = meet(met, touched, i);
                    into.push(plan.targets[i].link_base + u64::from(m.links));
                    m.links += 1;
                }
                Some(_) => {}
                None => unresolved += 1,
            }
        }
        if !r.links.is_empty() {
            causal.text.clear();
            for (k, &id) in r.links.iter().enumerate() {
                if k > 0 {
                    causal.text.extend_from_slice(b", ");
                }
                hex(&mut causal.text, id);
            }
            let iid = seq.special(Special::CausedBy, ev);
            ev.text_annotation(iid, &causal.text);
        }
        if unresolved > 0 {
            let iid = seq.special(Special::Unresolved, ev);
            ev.annotation(iid, FieldValue::U64(unresolved));
        }
        // A parent that does not hold it on its track: an arrow from the parent.
        if let Some(parent) = r.parent {
            let inside = !detached && seq.open.iter().rev().any(|&o| o == parent);
            if !inside {
                if let Some(i) = plan.target(parent, seq.cursor, found) {
                    if met[i].children < plan.targets[i].children {
                        let m = meet(met, touched, i);
                        into.push(plan.targets[i].child_base + u64::from(m.children));
                        m.children += 1;
                    }
                }
            }
        }
        // A correlation group: one flow through an undirected group's members in time order,
        // or arrows from a directed group's causes to its effects. The first pass worked out
        // its flows; a member of a large group is looked up.
        if let (Some(value), key) = (r.correlation, &r.callsite.correlate) {
            if !key.is_empty() {
                causal.text.clear();
                causal.text.extend_from_slice(key.as_bytes());
                causal.text.push(b'=');
                decimal(&mut causal.text, value);
                let iid = seq.special(Special::Correlate, ev);
                ev.text_annotation(iid, &causal.text);
                match seq.correlated.next(at_ns, r.id) {
                    Ok(flows) => flows.push(out, into),
                    Err(member) => {
                        let group = keys.group(r.callsite_index, key, false);
                        let large = group.and_then(|(key, role)| Some((large.get_mut(&(key, value))?, role)));
                        if let Some((large, role)) = large {
                            large.next(role, member).push(out, into);
                        }
                    }
                }
            }
        }
        // The same operation on every rank: one flow through them all.
        if let Some(o) = matched {
            let k = seq.occurrence(o.name, o.rank.and_then(|i| r.fields.iter().nth(i)));
            out.push(plan.matched[o.name as usize].1 + k);
            let iid = seq.special(Special::Matched, ev);
            ev.annotation(iid, FieldValue::U64(k));
        }
        ev.end(kind, name, track, out, into);
    }
}

/// The references met so far to target `i`, noted as touched in this process if it was not.
fn meet<'m>(met: &'m mut [Met], touched: &mut Vec<u32>, i: usize) -> &'m mut Met {
    if met[i] == Met::default() {
        touched.push(i as u32);
    }
    &mut met[i]
}

/// Appends `id` as 16 lowercase hex digits (`{:016x}`, without the formatting machinery).
fn hex(text: &mut Vec<u8>, id: u64) {
    let digits: [u8; 16] = std::array::from_fn(|k| b"0123456789abcdef"[(id >> (60 - 4 * k)) as usize & 15]);
    text.extend_from_slice(&digits);
}

/// Appends `v` in decimal (`{v}`).
fn decimal(text: &mut Vec<u8>, mut v: u64) {
    let mut digits = [0u8; 20];
    let mut n = 0;
    loop {
        digits[19 - n] = b'0' + (v % 10) as u8;
        n += 1;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    text.extend_from_slice(&digits[20 - n..]);
}
