//! What `hang`'s rules ask of each callsite (which field is the communicator or the request,
//! whether it sends, receives, is an effect or a collective), learnt once per callsite, and
//! integer fields read by position: shared by both readings of the files.

use super::waits::{self, Call, COLLECTIVE, RECEIVED};
use crate::{
    decode::{FieldValue, Fields, Item},
    model::{Callsite, Item as Kind},
};

/// What the rules ask of a callsite's items.
#[derive(Clone, Copy, Default)]
pub(super) struct Roles {
    pub(super) comm: Option<usize>,
    pub(super) request: Option<usize>,
    pub(super) send: bool,
    pub(super) effect: bool,
    pub(super) collective: bool,
    pub(super) received: bool,
}

fn roles(cs: &Callsite) -> Roles {
    let at = |name: &str| cs.field_index(name);
    Roles {
        comm: at("comm"),
        request: at("request"),
        send: waits::is_send(cs),
        effect: waits::is_effect(cs),
        collective: cs.correlate == COLLECTIVE,
        received: cs.name == RECEIVED,
    }
}

/// Per callsite index, learnt on first sight.
#[derive(Default)]
pub(super) struct Sites(Vec<Option<Roles>>);

impl Sites {
    pub(super) fn of(&mut self, item: &Item<'_>) -> Roles {
        let i = item.callsite_index as usize;
        if self.0.len() <= i {
            self.0.resize(i + 1, None);
        }
        *self.0[i].get_or_insert_with(|| roles(item.callsite))
    }
}

/// A call's index among its thread's spans.
pub(super) fn span_index(c: &Call) -> usize {
    match c.at.item {
        Kind::Span(i) | Kind::Event(i) => i,
    }
}

/// An integer field by position.
pub(super) fn value_at(fields: &Fields, at: Option<usize>) -> Option<u64> {
    match at.and_then(|k| fields.iter().nth(k))? {
        FieldValue::U64(v) => Some(v),
        FieldValue::I64(v) => u64::try_from(v).ok(),
        _ => None,
    }
}
