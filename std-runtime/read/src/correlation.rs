//! Directed correlations: which side of a correlation group an item is on.
//!
//! Spans and events with the same correlation key and value are one group, wherever they were
//! recorded. A plain key (`correlate = ("allreduce", seq)`) makes an **undirected** group: its
//! members are one thing seen from several places (the same allreduce on every rank), and none
//! comes first. A key that ends in `>` marks a **cause** and one that ends in `<` an
//! **effect**: members whose keys have the same stem (the key without its marker) and the same
//! value are one **directed** group, in which every effect is caused by every cause. A message
//! is the model case: the send records `("mpi.message>", h)`, the receive
//! `("mpi.message<", h)`, with `h` a value both sides compute alike.
//!
//! The rule belongs to the decoder, not to the file format: keys are written as the program
//! gave them. A directed key never joins the undirected group of its bare stem (`x>` and `x`
//! are different groups), and a lone `>` or `<` is a directed key with an empty stem.
//!
//! Every reader of correlations applies the rule through [`role`] and [`group_key`]: `why`
//! walks from an effect to its causes and never from a cause forward, the Perfetto export draws
//! one arrow from each cause to each effect, and the span formats link an effect's span to its
//! causes' spans.

use std::borrow::Cow;

/// What marks a cause: the last character of its key.
pub const CAUSE_MARK: char = '>';

/// What marks an effect: the last character of its key.
pub const EFFECT_MARK: char = '<';

/// An item's side of its correlation group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Role {
    /// A member of an undirected group: every member stands for the same thing.
    Member,
    /// A cause of a directed group (key ending in `>`).
    Cause,
    /// An effect of a directed group (key ending in `<`): caused by each cause.
    Effect,
}

impl Role {
    /// Whether the group is directed.
    pub fn directed(self) -> bool {
        self != Role::Member
    }
}

/// The stem of `key` and the role it marks: `("mpi.message", Cause)` for `"mpi.message>"`,
/// `("allreduce", Member)` for `"allreduce"`.
pub fn role(key: &str) -> (&str, Role) {
    if let Some(stem) = key.strip_suffix(CAUSE_MARK) {
        (stem, Role::Cause)
    } else if let Some(stem) = key.strip_suffix(EFFECT_MARK) {
        (stem, Role::Effect)
    } else {
        (key, Role::Member)
    }
}

/// The name a group goes by, the same for its causes and its effects: the key itself when it
/// is undirected, the stem followed by [`CAUSE_MARK`] when it is directed (so `x<` is grouped
/// with `x>`, never with `x`).
pub fn group_key(key: &str) -> Cow<'_, str> {
    match role(key) {
        (stem, Role::Effect) => Cow::Owned(format!("{stem}{CAUSE_MARK}")),
        _ => Cow::Borrowed(key),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_make_roles_and_join_stems() {
        assert_eq!(role("mpi.message>"), ("mpi.message", Role::Cause));
        assert_eq!(role("mpi.message<"), ("mpi.message", Role::Effect));
        assert_eq!(role("allreduce"), ("allreduce", Role::Member));
        assert_eq!(role(">"), ("", Role::Cause));
        assert_eq!(group_key("mpi.message<"), group_key("mpi.message>"));
        assert_ne!(group_key("x<"), group_key("x"));
        assert_eq!(group_key("x"), "x");
        assert!(Role::Effect.directed() && !Role::Member.directed());
    }
}
