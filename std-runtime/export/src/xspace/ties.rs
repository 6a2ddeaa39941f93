//! How device events join the host's steps: the `correlation_id` stats xprof groups by.
//!
//! With a GPU plane in the space (`/device:GPU:N`), xprof takes step times from the device
//! alone. Its grouping (`group_events.cc` in tsl's profiler utils) makes each host event with
//! `_r` a step, hands the step's number (`group_id`) down to the events nested in it on its
//! line, and from a host event with a `correlation_id` stat to every device event with the
//! same value: a kernel joins the step its launch ran in. From those device events it then
//! draws each step on the device (`derived_timeline.cc`, a `Steps` line) and counts a step's
//! device time (`xplane_to_step_events.cc`, only device events that carry a `correlation_id`);
//! a device event left out of every step shows in no step, and a GPU plane with none in a
//! step gives no step at all: "No step time measured".
//!
//! So the export ties every device slice it can to a host event, by one `correlation_id`
//! value on both (a span's output id, unique in the trace), in this order:
//! 1. a slice whose launcher is a host span or event (its first cause, `launched_by`) takes
//!    its launcher's id, and so does the launcher;
//! 2. a slice without one (a profile merged as slices, whose launches the trace lacks) takes
//!    the tie of the innermost launched slice of its process on its device plane that is
//!    running when it begins: `waffle.jax.timed`'s slice of a compiled call spans the kernels
//!    the call ran;
//! 3. else the innermost step marker of its process running when it begins, which gets its
//!    own id as its `correlation_id`;
//! 4. else none: xprof counts it in no step.
//!
//! Slices, launchers and steps are noted as they are written and tied once all are known
//! ([`Ties::apply`]), since a launcher may come after its slices (another file, another
//! process). Only the places are kept: a few words a slice, launcher and step.

use std::{collections::HashMap, io};

use super::{
    device::CORRELATION_ID,
    proto::{StatValue, XStat},
    space::{too_large, Space},
    MAX_MESSAGE,
};

/// Where an encoded event is: its space, its line there, and its number on the line (in
/// the order written, which holds until the file is written).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct EventAt {
    pub(super) space: u32,
    pub(super) line: u32,
    pub(super) index: u32,
}

/// An item that lasts: where it is, its process, its begin and end (Unix ns).
#[derive(Clone, Copy, Debug)]
struct Timed {
    at: EventAt,
    process: u32,
    start_ns: u64,
    end_ns: u64,
}

/// What the export notes to tie device slices to the host.
#[derive(Default)]
pub(super) struct Ties {
    /// Host spans and events that something refers to, by output id.
    hosts: HashMap<u64, EventAt>,
    /// Device slices, with their launcher's output id when it is in the trace.
    slices: Vec<(Timed, Option<u64>)>,
    /// Step markers, with their output ids.
    steps: Vec<(Timed, u64)>,
}

impl Ties {
    /// A host span or event `id` that a link names: it may have launched a slice.
    pub(super) fn host(&mut self, id: u64, at: EventAt) {
        self.hosts.insert(id, at);
    }

    /// A step marker.
    pub(super) fn step(&mut self, id: u64, at: EventAt, process: usize, [start_ns, end_ns]: [u64; 2]) {
        self.steps.push((Timed { at, process: process as u32, start_ns, end_ns }, id));
    }

    /// A device slice and its launcher, if any.
    pub(super) fn slice(
        &mut self,
        at: EventAt,
        process: usize,
        [start_ns, end_ns]: [u64; 2],
        launcher: Option<u64>,
    ) {
        self.slices.push((Timed { at, process: process as u32, start_ns, end_ns }, launcher));
    }

    /// Ties what can be tied (see the module's docs): each tied event gets its
    /// `correlation_id` stat.
    pub(super) fn apply(self, spaces: &mut [Space]) -> io::Result<()> {
        let mut tied = self.resolve(spaces);
        // A step that launched a slice is tied twice, with its own id both times.
        tied.sort_unstable();
        tied.dedup();
        for (at, id) in tied {
            let space = &mut spaces[at.space as usize];
            let stat =
                XStat { metadata_id: space.stats.id(CORRELATION_ID), value: Some(StatValue::Uint64(id)) };
            space.bytes += space.lines[at.line as usize].add_stat(at.index as usize, stat)?;
            // A stat is a few bytes, but the plane must stay within protobuf's limit (and the
            // bytes kept, old copies included, within twice that).
            if space.bytes > MAX_MESSAGE {
                return Err(too_large(&space.hosts[0]));
            }
        }
        Ok(())
    }

    /// The `correlation_id` of each event that gets one.
    fn resolve(self, spaces: &[Space]) -> Vec<(EventAt, u64)> {
        let plane = |at: EventAt| spaces[at.space as usize].lines[at.line as usize].plane.as_deref();
        let mut tied = Vec::new();
        // 1. Launched slices, kept by (process, space, plane) for the others.
        let mut launched: HashMap<_, Vec<(Timed, u64)>> = HashMap::new();
        let mut unlaunched = Vec::new();
        for (slice, launcher) in self.slices {
            // A launcher in another file (another host's) ties nothing: xprof reads each alone.
            let host = launcher.and_then(|id| Some((id, *self.hosts.get(&id)?)));
            match host.filter(|(_, host)| host.space == slice.at.space) {
                Some((id, host)) => {
                    tied.push((host, id));
                    tied.push((slice.at, id));
                    let key = (slice.process, slice.at.space, plane(slice.at));
                    launched.entry(key).or_default().push((slice, id));
                }
                None => unlaunched.push(slice),
            }
        }
        let launched: HashMap<_, Spans> = launched.into_iter().map(|(k, v)| (k, Spans::new(v))).collect();
        let mut steps: HashMap<u32, Vec<(Timed, u64)>> = HashMap::new();
        for (step, id) in self.steps {
            steps.entry(step.process).or_default().push((step, id));
        }
        let steps: HashMap<u32, Spans> = steps.into_iter().map(|(k, v)| (k, Spans::new(v))).collect();
        for slice in unlaunched {
            let key = (slice.process, slice.at.space, plane(slice.at));
            // 2. The launched slice it runs in; 3. else the step.
            if let Some((_, id)) = launched.get(&key).and_then(|s| s.innermost(slice.start_ns)) {
                tied.push((slice.at, id));
            } else if let Some((step, id)) =
                steps.get(&slice.process).and_then(|s| s.innermost(slice.start_ns))
            {
                tied.push((step, id));
                tied.push((slice.at, id));
            }
        }
        tied
    }
}

/// Time spans with a tie each, sorted by begin, to find the innermost one running at a time.
struct Spans {
    spans: Vec<(Timed, u64)>,
    /// Per span, the latest end among it and the spans before it.
    reach: Vec<u64>,
}

impl Spans {
    fn new(mut spans: Vec<(Timed, u64)>) -> Spans {
        spans.sort_by_key(|(t, id)| (t.start_ns, std::cmp::Reverse(t.end_ns), *id));
        let reach = spans
            .iter()
            .scan(0, |r, (t, _)| {
                *r = (*r).max(t.end_ns);
                Some(*r)
            })
            .collect();
        Spans { spans, reach }
    }

    /// The shortest span running at `t` (begun at or before it, ending after it): its place
    /// and tie. Only spans that reach past `t` are looked at, so a query costs the number of
    /// spans running at `t`, not of all.
    fn innermost(&self, t: u64) -> Option<(EventAt, u64)> {
        let begun = self.spans.partition_point(|(s, _)| s.start_ns <= t);
        let mut best: Option<&(Timed, u64)> = None;
        for k in (0..begun).rev() {
            if self.reach[k] <= t {
                break;
            }
            let (s, _) = &self.spans[k];
            let shorter = best.is_none_or(|(b, _)| s.end_ns - s.start_ns < b.end_ns - b.start_ns);
            if t < s.end_ns && shorter {
                best = Some(&self.spans[k]);
            }
        }
        best.map(|(s, id)| (s.at, *id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(n: u32) -> EventAt {
        EventAt { space: 0, line: 0, index: n }
    }

    fn spans(list: &[(u64, u64)]) -> Spans {
        let timed = |(k, &(start_ns, end_ns)): (usize, &(u64, u64))| {
            (Timed { at: at(k as u32), process: 0, start_ns, end_ns }, k as u64 + 100)
        };
        Spans::new(list.iter().enumerate().map(timed).collect())
    }

    #[test]
    fn the_innermost_span_running_at_a_time() {
        // A long span over two that follow each other, and one long before.
        let s = spans(&[(0, 5), (10, 100), (20, 40), (40, 60)]);
        let at_time = |t| s.innermost(t).map(|(_, id)| id);
        assert_eq!(at_time(3), Some(100));
        assert_eq!(at_time(5), None, "a span ends before its end");
        assert_eq!(at_time(10), Some(101), "and begins at its begin");
        assert_eq!(at_time(25), Some(102), "the shorter of two running");
        assert_eq!(at_time(40), Some(103), "the one beginning, not the one ending");
        assert_eq!(at_time(70), Some(101));
        assert_eq!(at_time(100), None);
        assert_eq!(spans(&[]).innermost(1), None);
        assert_eq!(spans(&[(7, 7)]).innermost(7), None, "an instant runs at no time");
    }
}
