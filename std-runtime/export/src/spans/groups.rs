//! Correlation groups as the span formats resolve them, and the items their links go to.
//!
//! Each member of a group (`key`, value) but the first links to the first; each effect of a
//! directed group links to each of its causes (see [`crate::correlation`]). The first pass
//! learns each group in one entry, whatever its size: its first member so far, its causes,
//! how many members and effects it has. The items other members link to, its *targets* (every
//! cause, and every member that was the first of its group when it was read), are numbered in
//! the order read, and where each ends up is kept by that number, in an array, not under its
//! id in a map: an item is told its number when it joins its group, and settles its place, or
//! finds its target's, by indexing.
//!
//! The second pass meets the same items in the same order. It learns which of them are targets
//! from the first pass's list of their positions (the n-th correlated item read), walked
//! forwards; an effect or a member finds its group once, to link to the targets it names. The
//! memory is an entry per group and per target; nothing is kept per member.

use super::{Link, LinkKind, Place};
use crate::{correlation::Role, index::IdMap};

/// No target (the end of a list of causes, a group without a first).
const NONE: u32 = u32::MAX;

/// A correlated item's place in its group's order: its time (Unix ns), process, thread and id
/// as recorded. The first member of an undirected group is the least.
pub(super) type Order = (u64, u32, u32, u64);

/// An item's membership in a correlation group.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Membership {
    /// The group: its key's number ([`crate::index::Keys`]) and its value.
    pub(super) key: u32,
    pub(super) value: u64,
    pub(super) role: Role,
    /// Its number among the targets, if it is one.
    pub(super) target: Option<u32>,
}

/// Where a target ends up.
#[derive(Clone, Copy, Default)]
struct Target {
    /// Its id as recorded.
    id: u64,
    place: Option<Place>,
    /// Whether the span showing it is a quiet root ([`Link::quiet`]).
    pub(super) quiet: bool,
}

/// One group, whatever its size.
struct Group {
    directed: bool,
    /// Undirected: its members, the first so far (in [`Order`]) and its target number.
    members: u32,
    first: Order,
    first_target: u32,
    /// Directed: its causes, a list through [`Groups::next_cause`], and how many effects.
    causes: u32,
    last_cause: u32,
    effects: u32,
}

/// The groups, their targets, and which correlated items are targets.
#[derive(Default)]
pub(crate) struct Groups {
    groups: IdMap<(u32, u64), Group>,
    /// Per target, where it ends up.
    targets: Vec<Target>,
    /// Per target, the target after it in its group's list of causes ([`NONE`] at the end).
    next_cause: Vec<u32>,
    /// Per target, the position of its item among the correlated items read (increasing).
    positions: Vec<u32>,
    /// Correlated items read in this pass.
    read: u32,
    /// The second pass: the next target to meet.
    next_target: u32,
    sealed: bool,
}

impl Groups {
    /// How many targets the trace has.
    pub(super) fn targets(&self) -> u32 {
        self.targets.len() as u32
    }

    /// An item of group (`key`, `value`) with `role` and `order` is read: its membership.
    /// The first pass counts it into its group; the second finds whether it is a target.
    pub(super) fn join(&mut self, key: u32, value: u64, role: Role, order: Order) -> Membership {
        let position = self.read;
        self.read += 1;
        let target = if self.sealed {
            let next = self.next_target as usize;
            (self.positions.get(next) == Some(&position)).then(|| {
                self.next_target += 1;
                next as u32
            })
        } else {
            self.count(key, value, role, order, position)
        };
        Membership { key, value, role, target }
    }

    /// The first pass's part of [`join`](Self::join).
    fn count(&mut self, key: u32, value: u64, role: Role, order: Order, position: u32) -> Option<u32> {
        let target = self.targets.len() as u32;
        let group = self.groups.entry((key, value)).or_insert(Group {
            directed: role.directed(),
            members: 0,
            first: order,
            first_target: NONE,
            causes: NONE,
            last_cause: NONE,
            effects: 0,
        });
        match role {
            // The first member so far is what the others link to: where it ends up is needed.
            Role::Member => {
                group.members += 1;
                if order > group.first {
                    return None;
                }
                (group.first, group.first_target) = (order, target);
            }
            // A directed group's effects link to each of its causes.
            Role::Cause => {
                match group.last_cause {
                    NONE => group.causes = target,
                    last => self.next_cause[last as usize] = target,
                }
                group.last_cause = target;
            }
            Role::Effect => {
                group.effects += 1;
                return None;
            }
        }
        self.targets.push(Target { id: order.3, place: None, quiet: false });
        self.next_cause.push(NONE);
        self.positions.push(position);
        Some(target)
    }

    /// Target `target` ends up at `place` (as far as this pass knows).
    pub(super) fn settle(&mut self, target: u32, place: Place) {
        self.targets[target as usize].place = Some(place);
    }

    /// The span showing target `target` is a quiet root.
    pub(super) fn quiet(&mut self, target: u32) {
        self.targets[target as usize].quiet = true;
    }

    /// The first pass is over: groups of one member (of no cause or no effect, if directed)
    /// are dropped, first-pass places are made final by `fix`, and the second pass starts.
    pub(super) fn seal(&mut self, mut fix: impl FnMut(&mut Place)) {
        self.groups.retain(|_, g| if g.directed { g.causes != NONE && g.effects > 0 } else { g.members > 1 });
        for place in self.targets.iter_mut().filter_map(|t| t.place.as_mut()) {
            fix(place);
        }
        self.sealed = true;
        self.read = 0;
    }

    /// The links of a correlated item (of `membership`, at `order`) shown by span `shown_by`:
    /// for an effect, to the spans showing its group's causes; for a member, to the span
    /// showing its group's first member, unless that is the item. A cause links to none of its
    /// effects: they follow from it, not it from them. No link from a span to itself, nor one
    /// that `out` has already.
    pub(super) fn links(
        &self,
        m: &Membership,
        order: Order,
        shown_by: u64,
        from_event: Option<u64>,
        out: &mut Vec<Link>,
    ) {
        if m.role == Role::Cause {
            return;
        }
        let Some(group) = self.groups.get(&(m.key, m.value)) else { return };
        let link = |target: u32, kind| {
            let t = &self.targets[target as usize];
            let p = t.place.filter(|p| p.span != shown_by)?;
            Some(Link {
                span: p.span,
                resolved: true,
                target_event: p.event.then_some(t.id),
                anchor: Some(p.anchor),
                from_event,
                kind,
                target: Some(target),
                quiet: t.quiet,
            })
        };
        if m.role == Role::Effect {
            let mut cause = group.causes;
            while cause != NONE {
                if let Some(l) = link(cause, LinkKind::Message).filter(|l| !out.iter().any(|o| o.same(l))) {
                    out.push(l);
                }
                cause = self.next_cause[cause as usize];
            }
        } else if group.first != order {
            out.extend(link(group.first_target, LinkKind::Correlated));
        }
    }
}
