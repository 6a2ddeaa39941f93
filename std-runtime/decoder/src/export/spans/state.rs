//! What the span formats' two passes share: where each referenced item ends up, the
//! correlation groups, the ids, and the processes; after the first pass, the plan of the
//! second (sealed: fresh ids counted in the first pass become ids, the trace id is chosen).

use waffle::wire::Calibration;

use super::{ids::Ids, Anchor, Context, ProcessInfo};
use crate::export::{
    index::{IdMap, Keys},
    passes,
};

/// Where a referenced item ends up.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Place {
    /// The span showing it.
    pub(super) span: u64,
    /// In the first pass: `span` is the count of a fresh id, not the id.
    pub(super) fresh: bool,
    /// Whether it is an event.
    pub(super) event: bool,
    /// Where it is.
    pub(super) anchor: Anchor,
}

/// An id something refers to.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Target {
    pub(super) place: Option<Place>,
    /// Whether a link names it.
    pub(super) linked: bool,
}

/// A correlated item: (time in Unix ns, process, thread, id), the order of its group.
pub(super) type Member = (u64, u32, u32, u64);

/// A correlation group: its first member so far, and how many it has; for a directed group
/// (see [`crate::correlation`]), the ids of its causes and how many effects it has.
pub(super) struct Group {
    pub(super) first: Member,
    pub(super) members: u32,
    pub(super) directed: bool,
    pub(super) causes: Vec<u64>,
    pub(super) effects: u32,
}

/// What the passes share: after the first, the plan of the second.
pub(crate) struct State {
    pub(super) ctx: Context,
    /// The calibration of the next file (its last CLOCK frame's).
    pub(super) next_calibration: Option<Calibration>,
    pub(super) logs: usize,
    pub(super) ids: Ids,
    pub(super) targets: IdMap<u64, Target>,
    pub(super) keys: Keys,
    /// Correlation groups by key number and value; after the first pass, only those of two
    /// or more members (directed: a cause and an effect at least).
    pub(super) groups: IdMap<(u32, u64), Group>,
    pub(super) sealed: bool,
    /// Processes begun in this pass.
    pub(super) processes_seen: usize,
}

impl State {
    pub(super) fn new(logs: usize) -> State {
        State {
            ctx: Context {
                processes: Vec::new(),
                first_ns: Vec::new(),
                trace_id: 0,
                quiet_roots: Default::default(),
            },
            next_calibration: None,
            logs,
            ids: Ids::default(),
            targets: IdMap::default(),
            keys: Keys::default(),
            groups: IdMap::default(),
            sealed: false,
            processes_seen: 0,
        }
    }

    /// The first pass is over.
    pub(super) fn seal(&mut self) {
        self.ids.seal();
        for t in self.targets.values_mut() {
            if let Some(p) = t.place.as_mut().filter(|p| p.fresh) {
                let id = self.ids.nth_fresh(p.span);
                if p.anchor.detached == Some(p.span) {
                    p.anchor.detached = Some(id);
                }
                (p.span, p.fresh) = (id, false);
            }
        }
        self.groups
            .retain(|_, g| if g.directed { !g.causes.is_empty() && g.effects > 0 } else { g.members > 1 });
        self.ctx.trace_id = trace_id(&self.ctx);
        self.sealed = true;
        self.processes_seen = 0;
    }

    /// Notes that something refers to `id`.
    pub(super) fn refer(&mut self, id: u64, linked: bool) {
        if id != 0 && !self.sealed {
            let t = self.targets.entry(id).or_default();
            t.linked |= linked;
        }
    }

    /// Where `id` ends up, if something refers to it: now known.
    pub(super) fn settle(&mut self, id: u64, place: Place) {
        if let Some(t) = self.targets.get_mut(&id) {
            t.place = Some(place);
        }
    }
}

impl passes::Plan for State {
    fn processes(&self) -> &[ProcessInfo] {
        &self.ctx.processes
    }

    /// The second pass takes processes from the first pass's [`Context`], not from the
    /// headers it reads again.
    fn processes_mut(&mut self) -> &mut [ProcessInfo] {
        &mut self.ctx.processes
    }
}

/// The trace id of the first process that has one; else one derived from the processes.
fn trace_id(ctx: &Context) -> u128 {
    if let Some(id) = ctx.processes.iter().map(|p| p.header.trace_id).find(|&id| id != 0) {
        return id;
    }
    let mut h = 0x5741_4646_u64; // "WAFF"
    for (p, first) in ctx.processes.iter().zip(&ctx.first_ns) {
        h = splitmix(h ^ u64::from(p.header.pid));
        h = splitmix(h ^ first.unwrap_or(0));
    }
    ((u128::from(splitmix(h)) << 64) | u128::from(splitmix(!h))).max(1)
}

fn splitmix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}
