//! Choosing the symptom, by name and occurrence or by id, and what to say when it is not there.

use crate::model::{Item, ItemRef, Trace};
use std::collections::HashMap;

/// Which span or event is the symptom.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Selector {
    /// The `nth` (from 0) event with this name, in time order across all files. When no event
    /// has the name, spans with it are taken instead.
    Name {
        /// The event's name.
        name: String,
        /// Which occurrence, counting from 0.
        nth: usize,
    },
    /// The span or event with this id.
    Id(u64),
    /// The first tensor (in time order across all files) with a NaN element (`tensor.nan`
    /// > 0), as [`crate::diff::first_nan`] finds it.
    FirstNan,
}

impl Selector {
    /// The `nth` (from 0) event named `name`.
    pub fn name(name: impl Into<String>, nth: usize) -> Selector {
        Selector::Name { name: name.into(), nth }
    }

    /// The span or event with id `id`.
    pub fn id(id: u64) -> Selector {
        Selector::Id(id)
    }

    /// Reads an id as printed by waffle (16 hex digits), with a `0x` prefix (hex), or as a
    /// decimal number. Other hex forms are accepted when they contain a letter `a`–`f`.
    pub fn parse_id(s: &str) -> Result<u64, String> {
        let t = s.trim();
        let bad = || format!("`{s}` is not an id: give 16 hex digits, 0x<hex>, or a decimal number");
        let id = if let Some(hex) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
            u64::from_str_radix(hex, 16)
        } else if t.len() == 16 || !t.bytes().all(|b| b.is_ascii_digit()) {
            u64::from_str_radix(t, 16)
        } else {
            t.parse()
        };
        id.ok().filter(|&id| id != 0).ok_or_else(bad)
    }
}

/// Why no symptom could be chosen.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WhyError {
    /// No event (or span) has the name.
    #[error("no event named {name:?} in these files{}", closest_list(closest))]
    NoSuchName {
        /// The name asked for.
        name: String,
        /// The names present that are closest to it, closest first (at most 5).
        closest: Vec<String>,
    },
    /// Fewer occurrences than asked for.
    #[error(
        "occurrence {nth} of {name:?} asked for (counting from 0), but there {} only {count}",
        if *count == 1 { "is" } else { "are" }
    )]
    NthOutOfRange {
        /// The name asked for.
        name: String,
        /// The occurrence asked for, from 0.
        nth: usize,
        /// How many there are.
        count: usize,
    },
    /// No span or event has the id.
    #[error("no span or event with id {id:016x} in these files")]
    NoSuchId {
        /// The id asked for.
        id: u64,
    },
    /// No tensor has a NaN element.
    #[error("no tensor with a NaN element (tensor.nan > 0) in these files")]
    NoNan,
}

/// The item a selector picks.
pub(super) fn select(
    trace: &Trace,
    index: &HashMap<u64, ItemRef>,
    selector: &Selector,
) -> Result<ItemRef, WhyError> {
    let (name, nth) = match selector {
        Selector::Id(id) => return index.get(id).copied().ok_or(WhyError::NoSuchId { id: *id }),
        Selector::FirstNan => return crate::diff::first_nan(trace).map(|(r, _)| r).ok_or(WhyError::NoNan),
        Selector::Name { name, nth } => (name, *nth),
    };
    let named = |want_span: bool| {
        let mut found: Vec<(u64, ItemRef)> = index
            .values()
            .filter(|r| matches!(r.item, Item::Span(_)) == want_span)
            .map(|&r| (trace.describe(r), r))
            .filter(|(v, _)| v.callsite.name == *name)
            .map(|(v, r)| (v.ts_ns, r))
            .collect();
        found.sort_by_key(|&(ts, r)| (ts, r.process, r.thread, item_index(r.item)));
        found
    };
    let mut found = named(false);
    if found.is_empty() {
        found = named(true);
    }
    if found.is_empty() {
        let names = index.values().map(|&r| &*trace.describe(r).callsite.name);
        return Err(WhyError::NoSuchName { name: name.clone(), closest: closest(name, names, 5) });
    }
    let count = found.len();
    found.get(nth).map(|&(_, r)| r).ok_or(WhyError::NthOutOfRange { name: name.clone(), nth, count })
}

fn item_index(item: Item) -> usize {
    match item {
        Item::Span(i) | Item::Event(i) => i,
    }
}

/// Up to `n` distinct names from `names` closest to `want`, ignoring case: names containing it
/// first, then those missing fewer of its words, then by edit distance.
pub(super) fn closest<'a>(want: &str, names: impl Iterator<Item = &'a str>, n: usize) -> Vec<String> {
    let want_l = want.to_lowercase();
    let mut names: Vec<&str> = names.collect();
    names.sort_unstable();
    names.dedup();
    let words: Vec<&str> = want_l.split_whitespace().collect();
    let mut scored: Vec<(bool, usize, usize, &str)> = names
        .into_iter()
        .map(|name| {
            let l = name.to_lowercase();
            let contains = !want_l.is_empty() && l.contains(&want_l);
            let missing = words.iter().filter(|w| !l.split_whitespace().any(|x| x == **w)).count();
            (!contains, missing, edit_distance(&want_l, &l), name)
        })
        .collect();
    scored.sort();
    scored.into_iter().take(n).map(|(.., name)| name.to_owned()).collect()
}

/// The "; closest names present: ..." tail of a not-found message.
fn closest_list(names: &[String]) -> String {
    if names.is_empty() {
        return "; these files hold no events or spans".to_owned();
    }
    let quoted: Vec<String> = names.iter().map(|n| format!("{n:?}")).collect();
    format!("; closest names present: {}", quoted.join(", "))
}

/// Levenshtein distance over characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diag = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let next = (diag + usize::from(ca != cb)).min(row[j] + 1).min(row[j + 1] + 1);
            diag = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}
