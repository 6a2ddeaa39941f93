//! The chain of work across ranks that sets how long a run (or one step) took
//! (`waffle-decode critical-path`).
//!
//! **The path.** It is walked back from the end: from the rank that finished last, back through
//! what it did, until it reached the end of a wait ([`crate::waits`]); there the rank was
//! released by another, so the path goes on from the rank it waited for, at the moment that rank
//! released it (its send, its entry into the collective), and so on back to the start. Each
//! piece on the way is a **segment**: what that rank was doing (its innermost span, an MPI call
//! outside its waits, or the gap between two spans). The segments follow each other in time and
//! their durations sum to the length.
//!
//! **What if it were free.** For each of the largest contributors (a rank's span name, summed
//! over the path), the run is replayed with that work taking no time: each rank does the same
//! work in the same order, each wait ends when what it waited for happens in the replay. The
//! length the replay gives tells how much shorter the run would be, which the next-longest
//! path bounds: freeing work off every other path gains at most what it takes on the path.
//!
//! **A step** (`--step N`): the spans of the program's own with a `step` (or `iteration`) field
//! equal to N, on every rank; the path runs from the latest end of those back to their earliest
//! begin.
//!
//! ```
//! use waffle_analyze::critical_path;
//! # let trace = waffle_read::model::Trace::default();
//! let path = critical_path::critical_path(&trace, None).unwrap();
//! assert_eq!(path.length_ns, 0);
//! ```

use std::collections::HashMap;
use std::path::Path;

use crate::{
    model::Trace,
    reader::Warning,
    timeline::{self, activity, Doing, Labels, Run, Span},
    waits::classify::{classify, Found},
    RunError,
};

mod render;
mod replay;
#[cfg(test)]
mod tests;

/// How many contributors are replayed as if free.
const REPLAYED: usize = 5;

/// One piece of the path.
#[derive(Clone, Debug, PartialEq)]
pub struct Segment {
    /// The process (its file's place among the files given).
    pub process: usize,
    /// The rank.
    pub rank: i64,
    /// Its thread (index in its file).
    pub thread: usize,
    /// What it was doing: a span's name, or `gap A → B`.
    pub span: String,
    /// The span's id (0 for a gap).
    pub span_id: u64,
    /// When the piece began, Unix ns.
    pub start_ns: u64,
    /// How long it lasted.
    pub dur_ns: u64,
}

/// A rank's work of one name on the path, and what freeing it would gain.
#[derive(Clone, Debug, PartialEq)]
pub struct Contributor {
    /// The rank.
    pub rank: i64,
    /// Its thread.
    pub thread: usize,
    /// The span name (or gap).
    pub span: String,
    /// Its time on the path.
    pub on_path_ns: u64,
    /// How much shorter the run (or step) would be if it took no time (replayed: only for the
    /// largest few).
    pub if_free_ns: Option<u64>,
}

/// The critical path.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CriticalPath {
    /// The step, if one was asked for.
    pub step: Option<i64>,
    /// Where the run (or step) begins and ends, Unix ns, and its length.
    pub start_ns: u64,
    /// Its end.
    pub end_ns: u64,
    /// `end_ns - start_ns`: what the segments sum to.
    pub length_ns: u64,
    /// The path, in time order.
    pub segments: Vec<Segment>,
    /// The most time on the path first.
    pub contributors: Vec<Contributor>,
    /// What the reader should know about the input.
    pub notes: Vec<String>,
}

/// A piece of a lane: work (what it was doing) or a wait (index in the waits found).
#[derive(Clone, Copy, Debug)]
enum What {
    Work(Doing),
    Wait(u32),
}

#[derive(Clone, Copy, Debug)]
struct Item {
    a: u64,
    b: u64,
    what: What,
}

/// Each lane's pieces from `start` to its last span's end, waits cut out of its activity.
fn items(run: &Run, found: &[Found], start: u64) -> Vec<Vec<Item>> {
    let mut waits: Vec<Vec<(u64, u64, u32)>> = vec![Vec::new(); run.lanes.len()];
    for (k, f) in found.iter().enumerate() {
        waits[f.at.lane as usize].push((f.start_ns, f.end_ns, k as u32));
    }
    run.lanes
        .iter()
        .zip(&waits)
        .map(|(lane, waits)| {
            let Some(end) = lane.spans.iter().map(|s| s.end_ns).max() else { return Vec::new() };
            let pieces = activity(lane);
            let mut out = Vec::new();
            let mut t = start.min(end);
            let mut w = 0;
            let mut p = pieces.partition_point(|x| x.0 <= t) - 1;
            while t < end {
                while w < waits.len() && waits[w].1 <= t {
                    w += 1;
                }
                if let Some(&(_, we, f)) = waits.get(w).filter(|x| x.0 <= t) {
                    let b = we.min(end);
                    out.push(Item { a: t, b, what: What::Wait(f) });
                    t = b;
                    continue;
                }
                while pieces.get(p + 1).is_some_and(|x| x.0 <= t) {
                    p += 1;
                }
                let next_piece = pieces.get(p + 1).map_or(u64::MAX, |x| x.0);
                let next_wait = waits.get(w).map_or(u64::MAX, |x| x.0);
                let b = next_piece.min(next_wait).min(end);
                out.push(Item { a: t, b, what: What::Work(pieces[p].1) });
                t = b;
            }
            out
        })
        .collect()
}

/// The index of the item of `items` holding time `t` (the last one ending at `t` if `t` is an
/// end).
fn holding(items: &[Item], t: u64) -> Option<usize> {
    let k = items.partition_point(|x| x.a < t);
    k.checked_sub(1)
}

struct Walk<'r> {
    run: &'r Run,
    found: &'r [Found],
    items: Vec<Vec<Item>>,
    /// The label of each work item (`u32::MAX` for a wait), by lane.
    labels: Vec<Vec<u32>>,
}

impl Walk<'_> {
    /// The segments from `end` on lane `lane` back to `start`, in time order.
    fn walk(&self, mut lane: u32, end: u64, start: u64) -> Vec<(u32, Doing, u64, u64)> {
        let mut out: Vec<(u32, Doing, u64, u64)> = Vec::new();
        let mut t = end;
        // Jumps from wait to cause since the path last went back in time: more than there are
        // lanes means waits that are each other's cause at one moment (clocks that disagree).
        let mut jumps = 0;
        'lanes: while t > start {
            let items = &self.items[lane as usize];
            let Some(mut k) = holding(items, t) else {
                out.push((lane, Doing::Gap(None, None), start, t));
                break;
            };
            loop {
                let item = items[k];
                if item.b < t {
                    // After the lane's last span.
                    out.push((lane, Doing::Gap(self.last_top(lane), None), item.b.max(start), t));
                    t = item.b;
                }
                let a = item.a.max(start);
                match item.what {
                    What::Wait(f) if jumps <= self.run.lanes.len() => {
                        jumps += 1;
                        lane = self.found[f as usize].cause.lane;
                        continue 'lanes;
                    }
                    What::Wait(f) => out.push((lane, Doing::Span(self.found[f as usize].at.span), a, t)),
                    What::Work(d) => out.push((lane, d, a, t)),
                }
                jumps = 0;
                t = a;
                if t <= start || k == 0 {
                    break 'lanes;
                }
                k -= 1;
            }
        }
        out.reverse();
        // Neighbours doing the same on the same lane are one segment.
        let mut merged: Vec<(u32, Doing, u64, u64)> = Vec::with_capacity(out.len());
        for s in out.into_iter().filter(|s| s.3 > s.2) {
            match merged.last_mut() {
                Some(m) if m.0 == s.0 && m.1 == s.1 && m.3 == s.2 => m.3 = s.3,
                _ => merged.push(s),
            }
        }
        merged
    }

    /// The lane's last span that no other span of it holds.
    fn last_top(&self, lane: u32) -> Option<u32> {
        let l = &self.run.lanes[lane as usize];
        (0..l.spans.len()).rev().find(|&k| l.parent[k].is_none()).map(|k| k as u32)
    }
}

/// The critical path of a decoded run, or of its step `step`.
pub fn critical_path(trace: &Trace, step: Option<i64>) -> Result<CriticalPath, RunError> {
    critical_path_of(&Run::from_trace(trace), step)
}

/// The critical path of a run read with [`crate::read_run`], or of its step `step`.
pub fn critical_path_of(run: &Run, step: Option<i64>) -> Result<CriticalPath, RunError> {
    let found = classify(run);
    // The spans of the step (of the program's own), or every span.
    let in_window =
        |s: &&Span| step.is_none() || (!timeline::is_mpi(s) && run.extra(s).and_then(|e| e.step) == step);
    // The window, and the lanes of its first begin and last end.
    let mut window: Option<(u64, u64, u32)> = None;
    for (l, lane) in run.lanes.iter().enumerate() {
        let chosen = lane.spans.iter().filter(|s| in_window(s));
        for s in chosen {
            window = Some(match window {
                None => (s.start_ns, s.end_ns, l as u32),
                Some((a, b, last)) => {
                    (a.min(s.start_ns), b.max(s.end_ns), if s.end_ns > b { l as u32 } else { last })
                }
            });
        }
    }
    let Some((start, end, last)) = window else {
        return match step {
            Some(step) => Err(RunError::NoStep(step)),
            None => Ok(CriticalPath::default()),
        };
    };
    let run_start = run.lanes.iter().flat_map(|l| l.spans.first()).map(|s| s.start_ns).min().unwrap_or(start);
    let mut path = Walk { run, found: &found, items: items(run, &found, run_start), labels: Vec::new() };
    let mut labels = Labels::default();
    path.labels = (path.items.iter().enumerate())
        .map(|(l, items)| {
            let label = |i: &Item| match i.what {
                What::Work(d) => labels.of(run, l as u32, d),
                What::Wait(_) => u32::MAX,
            };
            items.iter().map(label).collect()
        })
        .collect();
    let walked = path.walk(last, end, start);
    let named: Vec<u32> = walked.iter().map(|&(lane, d, ..)| labels.of(run, lane, d)).collect();
    let segments: Vec<Segment> = walked
        .iter()
        .zip(&named)
        .map(|(&(lane, d, a, b), &label)| Segment {
            process: run.lanes[lane as usize].process,
            rank: run.rank(lane),
            thread: run.lanes[lane as usize].thread,
            span: labels.name(run, label).to_owned(),
            span_id: match d {
                Doing::Span(k) => run.lanes[lane as usize].spans[k as usize].id,
                Doing::Gap(..) => 0,
            },
            start_ns: a,
            dur_ns: b - a,
        })
        .collect();
    let mut sums: HashMap<(u32, u32), u64> = HashMap::new();
    for ((&(lane, ..), s), &label) in walked.iter().zip(&segments).zip(&named) {
        *sums.entry((lane, label)).or_default() += s.dur_ns;
    }
    let mut ranked: Vec<((u32, u32), u64)> = sums.into_iter().collect();
    ranked.sort_by(|a, b| {
        b.1.cmp(&a.1).then(labels.name(run, a.0 .1).cmp(labels.name(run, b.0 .1))).then(a.0.cmp(&b.0))
    });
    // Items in the order their original ends come, work before waits at one time.
    let mut order: Vec<(u32, u32)> = Vec::new();
    for (l, items) in path.items.iter().enumerate() {
        order.extend((0..items.len() as u32).map(|k| (l as u32, k)));
    }
    let key = |&(l, k): &(u32, u32)| {
        let i = path.items[l as usize][k as usize];
        (i.b, matches!(i.what, What::Wait(_)), l, k)
    };
    order.sort_unstable_by_key(key);
    // A replay keeps each lane's order, so a lane's times move monotonically: its earliest
    // begin and latest end in the window stay its earliest and latest.
    let bounds: Vec<Option<(u64, u64)>> = (run.lanes.iter())
        .map(|lane| {
            let mut chosen = lane.spans.iter().filter(|s| in_window(s));
            let first = chosen.next()?;
            Some(
                chosen.fold((first.start_ns, first.end_ns), |(a, b), s| (a.min(s.start_ns), b.max(s.end_ns))),
            )
        })
        .collect();
    let measured = |end: &[Vec<u64>]| -> u64 {
        let mut lo = u64::MAX;
        let mut hi = 0;
        for (l, &(a, b)) in bounds.iter().enumerate().filter_map(|(l, w)| Some((l, w.as_ref()?))) {
            lo = lo.min(path.moved(end, l as u32, a));
            hi = hi.max(path.moved(end, l as u32, b));
        }
        hi.saturating_sub(lo)
    };
    let length = end - start;
    let contributors = ranked
        .iter()
        .enumerate()
        .map(|(k, ((lane, label), on_path))| {
            let if_free = (k < REPLAYED).then(|| {
                let ends = path.replay(&order, Some((*lane, *label)));
                length.saturating_sub(measured(&ends))
            });
            Contributor {
                rank: run.rank(*lane),
                thread: run.lanes[*lane as usize].thread,
                span: labels.name(run, *label).to_owned(),
                on_path_ns: *on_path,
                if_free_ns: if_free,
            }
        })
        .collect();
    Ok(CriticalPath {
        step,
        start_ns: start,
        end_ns: end,
        length_ns: length,
        segments,
        contributors,
        notes: timeline::cut_notes(run),
    })
}

/// [`critical_path`] of the files of one run, checked as [`crate::waits::waits_files`] checks
/// them.
pub fn critical_path_files<P: AsRef<Path>>(
    paths: &[P],
    step: Option<i64>,
) -> Result<(CriticalPath, Vec<Warning>), RunError> {
    let (run, warnings) = timeline::read_run(paths)?;
    Ok((critical_path_of(&run, step)?, warnings))
}
