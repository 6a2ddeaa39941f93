//! What the span formats' two passes share: where each referenced item ends up, the
//! correlation groups, the ids, and the processes; after the first pass, the plan of the
//! second (sealed: fresh ids counted in the first pass become ids, the trace id is chosen).

use waffle_wire::Calibration;

use super::{groups::Groups, ids::Ids, Place, ProcessInfo, TraceInfo};
use crate::{
    decode::stream::Header,
    index::{IdMap, Keys},
    passes,
};

/// An id something names (a link, a parent elsewhere).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Target {
    pub(super) place: Option<Place>,
    /// Whether a link names it.
    pub(super) linked: bool,
    /// Whether the span showing it is a quiet root ([`Link::quiet`](super::Link::quiet)).
    pub(super) quiet: bool,
}

/// What the passes share: after the first, the plan of the second.
pub(crate) struct State {
    pub(super) ctx: TraceInfo,
    /// The calibration of the next file (its last CLOCK frame's).
    pub(super) next_calibration: Option<Calibration>,
    pub(super) logs: usize,
    pub(super) ids: Ids,
    /// Ids that items name, by id.
    pub(super) targets: IdMap<u64, Target>,
    pub(super) keys: Keys,
    /// Correlation groups and the items their members link to.
    pub(super) groups: Groups,
    pub(super) sealed: bool,
    /// Processes begun in this pass.
    pub(super) processes_seen: usize,
}

impl State {
    pub(super) fn new(logs: usize) -> State {
        State {
            ctx: TraceInfo { processes: Vec::new(), first_ns: Vec::new(), trace_id: 0, targets: 0 },
            next_calibration: None,
            logs,
            ids: Ids::default(),
            targets: IdMap::default(),
            keys: Keys::default(),
            groups: Groups::default(),
            sealed: false,
            processes_seen: 0,
        }
    }

    #[cfg(any(feature = "send", test))]
    /// The state of [`OnePass`](super::OnePass): sealed from the start, with no plan.
    pub(super) fn one_pass(logs: usize) -> State {
        let mut st = State::new(logs);
        st.ids.seal();
        st.sealed = true;
        st
    }

    /// (One pass.) The process whose header was just read, as it is known while its file is
    /// still written: complete, as far as anyone knows yet, and the trace id of its own.
    pub(super) fn live_process(&mut self, source: &str, header: &Header) {
        let mut info = ProcessInfo::new(source, header);
        info.complete = true;
        self.ctx.processes.push(info);
        self.ctx.first_ns.push(None);
        if self.ctx.trace_id == 0 {
            self.ctx.trace_id = if header.trace_id != 0 {
                header.trace_id
            } else {
                (u128::from(header.pid) << 64 | u128::from(header.calibration.anchor_unix_ns)).max(1)
            };
        }
    }

    /// The first pass is over.
    pub(super) fn seal(&mut self) {
        self.ids.seal();
        let ids = &self.ids;
        let fix = |p: &mut Place| {
            if p.fresh {
                let id = ids.nth_fresh(p.span);
                if p.anchor.detached == Some(p.span) {
                    p.anchor.detached = Some(id);
                }
                (p.span, p.fresh) = (id, false);
            }
        };
        self.targets.values_mut().filter_map(|t| t.place.as_mut()).for_each(fix);
        self.groups.seal(fix);
        self.ctx.trace_id = trace_id(&self.ctx);
        self.ctx.targets = self.groups.targets();
        self.sealed = true;
        self.processes_seen = 0;
    }

    /// Notes that something names `id`.
    pub(super) fn refer(&mut self, id: u64, linked: bool) {
        if id != 0 && !self.sealed {
            let t = self.targets.entry(id).or_default();
            t.linked |= linked;
        }
    }

    /// What is known of `id`, if something names it.
    #[inline]
    pub(super) fn named(&self, id: u64) -> Option<&Target> {
        if self.targets.is_empty() {
            return None;
        }
        self.targets.get(&id)
    }

    /// Where item `id` (correlation target `target`, if it is one) ends up, if something
    /// names it: now known.
    #[inline]
    pub(super) fn settle(&mut self, id: u64, target: Option<u32>, place: Place) {
        if let Some(t) = target {
            self.groups.settle(t, place);
        }
        if !self.targets.is_empty() {
            if let Some(t) = self.targets.get_mut(&id) {
                t.place = Some(place);
            }
        }
    }
}

impl passes::Plan for State {
    fn processes(&self) -> &[ProcessInfo] {
        &self.ctx.processes
    }

    /// The second pass takes processes from the first pass's [`TraceInfo`], not from the
    /// headers it reads again.
    fn processes_mut(&mut self) -> &mut [ProcessInfo] {
        &mut self.ctx.processes
    }
}

/// The trace id of the first process that has one; else one derived from the processes.
fn trace_id(ctx: &TraceInfo) -> u128 {
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
