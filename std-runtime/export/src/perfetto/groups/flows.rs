//! What the plan hands the second pass for correlation groups: each group's flow numbering
//! ([`Group`]), a member's flows ([`Flows`]), and each thread's queue of them ([`Queue`]).

use super::*;

/// A group as the plan counts it (and, large, as the second pass meets its members): its members, whether any were counted in the cache (then it
/// is large: looked up in the second pass), its first flow, and its causes and effects so far
/// as the plan goes through its notes.
#[derive(Clone, Default)]
pub(in crate::perfetto) struct Group {
    pub(super) key: GroupKey,
    pub(super) counted: Counted,
    pub(super) large: bool,
    pub(super) flow: u64,
    pub(super) causes_met: u32,
    pub(super) effects_met: u32,
}

impl Group {
    /// Whether it has causes or effects: then its members' flows depend on how many came
    /// before them, in every file.
    pub(in crate::perfetto) fn directed(&self) -> bool {
        self.counted.causes > 0 || self.counted.effects > 0
    }

    /// How many flow ids it takes: one arrow from each cause to each effect of a directed group,
    /// one flow through the members of an undirected one; none for a group of one side or one
    /// member.
    pub(super) fn flows(&self) -> u64 {
        let c = &self.counted;
        if c.causes > 0 || c.effects > 0 {
            u64::from(c.causes) * u64::from(c.effects)
        } else {
            u64::from(c.members > 1)
        }
    }

    /// The flows of its next member, `member` as `role`: a cause starts an arrow to each
    /// effect, an effect ends one from each cause (flow + cause number x effects + effect
    /// number, causes and effects numbered as they come in record order); an undirected
    /// group's members start its flow but the last, which ends it.
    pub(in crate::perfetto) fn next(&mut self, role: Role, member: Member) -> Flows {
        let Counted { causes: c, effects: e, members, last } = self.counted;
        match role {
            Role::Cause if self.causes_met < c && e > 0 => {
                let i = next_number(&mut self.causes_met);
                Flows::out(self.flow + u64::from(i) * u64::from(e), e)
            }
            Role::Effect if self.effects_met < e && c > 0 => {
                Flows::into(self.flow + u64::from(next_number(&mut self.effects_met)), c, e)
            }
            Role::Member if c == 0 && e == 0 && members > 1 => Flows::member(self.flow, member == last),
            _ => Flows::NONE,
        }
    }
}

/// A noted member's flows, where it goes in record order.
#[derive(Clone, Copy)]
pub(super) struct Done {
    pub(super) n: u64,
    pub(super) k: u64,
    pub(super) stream: u32,
    pub(super) flows: Flows,
}

/// The flows of one correlated item: ids `first + k * step` for `k < count`, which it starts
/// (`step` 0: consecutive ids) or ends (`step` > 0). In a queue, an entry with no ids stands for
/// one item without flows (`first` 0) or for the next `first` items, members of large groups.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::perfetto) struct Flows {
    pub(super) first: u64,
    pub(super) count: u32,
    pub(super) step: u32,
}

impl Flows {
    pub(super) const NONE: Flows = Flows { first: 0, count: 0, step: 0 };

    /// Starts `count` consecutive flows from `first`.
    pub(super) fn out(first: u64, count: u32) -> Flows {
        Flows { first, count, step: 0 }
    }

    /// Ends `count` flows from `first`, `step` apart.
    pub(super) fn into(first: u64, count: u32, step: u32) -> Flows {
        Flows { first, count, step }
    }

    /// The flow through an undirected group: ended by its last member, started by the others.
    pub(super) fn member(flow: u64, last: bool) -> Flows {
        if last {
            Flows::into(flow, 1, 1)
        } else {
            Flows::out(flow, 1)
        }
    }

    /// (In a queue) the next `items` items are members of large groups.
    pub(super) fn large(items: u64) -> Flows {
        Flows { first: items, count: 0, step: 0 }
    }

    pub(super) fn is_large(&self) -> bool {
        self.count == 0 && self.first > 0
    }

    /// Adds its ids to the flows the item starts (`out`) or ends (`into`).
    pub(in crate::perfetto) fn push(self, out: &mut Vec<u64>, into: &mut Vec<u64>) {
        let ids = (0..u64::from(self.count)).map(|k| self.first + k * u64::from(self.step.max(1)));
        if self.step == 0 {
            out.extend(ids);
        } else {
            into.extend(ids);
        }
    }
}

/// A thread's correlated items' flows, in record order.
#[derive(Default)]
pub(in crate::perfetto) struct Queue {
    pub(super) entries: Vec<Flows>,
    pub(super) at: usize,
    /// The thread's stream number (see [`Member`]).
    pub(super) stream: u32,
}

impl Queue {
    /// The flows of the thread's next correlated item, `id` at `at_ns`; else, if it is a
    /// member of a large group (or beyond what the first pass read), which member it is.
    #[inline]
    pub(in crate::perfetto) fn next(&mut self, at_ns: u64, id: u64) -> Result<Flows, Member> {
        self.take().ok_or(Member { ns: at_ns, stream: self.stream, id })
    }

    /// Adds `flows` at the end, one run of large groups' members with the run before it.
    pub(super) fn push(&mut self, flows: Flows) {
        match self.entries.last_mut() {
            Some(e) if e.is_large() && flows.is_large() => e.first += flows.first,
            _ => self.entries.push(flows),
        }
    }

    pub(super) fn take(&mut self) -> Option<Flows> {
        let e = self.entries.get_mut(self.at)?;
        if e.is_large() {
            e.first -= 1;
            if e.first == 0 {
                self.at += 1;
            }
            return None;
        }
        self.at += 1;
        Some(*e)
    }
}

/// `*n`, then counts one more.
pub(super) fn next_number(n: &mut u32) -> u32 {
    let number = *n;
    *n = number.saturating_add(1);
    number
}

/// Every correlated item's flows: per process and thread, the queue of those the first pass
/// noted; and the large groups by key, for the others.
#[derive(Default)]
pub(in crate::perfetto) struct Correlations {
    pub(in crate::perfetto) queues: Vec<Vec<Queue>>,
    pub(in crate::perfetto) large: IdMap<GroupKey, Group>,
}
