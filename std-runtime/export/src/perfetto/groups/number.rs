//! The plan's part of the groups: each partition counted and its groups' flows numbered, on
//! as many threads as the export has, then every noted member's flows put in its thread's
//! queue.

use super::{flows::Done, *};
use std::ops::Range;
use waffle_read::threads::on_threads;

impl Groups {
    /// Numbers the groups' flows from `next` on (keys by name, `rank` giving each key number's
    /// place; each key's groups in value order) and works out every noted member's flows: each
    /// thread's queue, per process, and the large groups. The partitions are counted and
    /// numbered on up to `threads` threads, each one by itself; the result is the same with
    /// any number.
    pub(in crate::perfetto) fn plan(mut self, next: &mut u64, rank: &[u32], threads: usize) -> Correlations {
        (0..self.hot.len()).for_each(|way| self.evict(way));
        let Groups { parts, counted, threads: streams, starts, noted, .. } = self;
        let mut counted_by_part: Vec<Vec<(GroupKey, Counted)>> = vec![Vec::new(); parts.len()];
        for (key, c) in counted {
            counted_by_part[part(key.1)].push((key, c));
        }
        // Each partition's groups, and each note's group among them.
        let parts: Vec<_> = parts.into_iter().zip(counted_by_part).collect();
        let counts = on_threads(parts, threads, |(recs, counted): (Vec<Rec>, Vec<(GroupKey, Counted)>)| {
            let mut index: HashMap<GroupKey, u32, IdHash> = HashMap::default();
            let mut groups: Vec<Group> = Vec::new();
            let at: Vec<u32> =
                recs.iter().map(|r| group(&mut index, &mut groups, (r.key, r.value))).collect();
            for &(key, ref c) in &counted {
                let at = group(&mut index, &mut groups, key);
                let g = &mut groups[at as usize];
                g.large = true;
                g.counted.sum(c);
            }
            for (r, &g) in recs.iter().zip(&at) {
                groups[g as usize].counted.add(r.role, || r.member());
            }
            // The flows each key takes in this partition, by key.
            let mut flows: Vec<(u32, u64)> = Vec::new();
            for g in &groups {
                match flows.binary_search_by_key(&g.key.0, |&(k, _)| k) {
                    Ok(i) => flows[i].1 += g.flows(),
                    Err(i) => flows.insert(i, (g.key.0, g.flows())),
                }
            }
            (recs, groups, at, flows)
        });
        // Each key's first flow (keys by name), then where it stands at each partition: the
        // partitions are in value order.
        let keys = rank.len();
        let mut base = vec![0u64; keys];
        for (_, _, _, flows) in &counts {
            flows.iter().for_each(|&(k, f)| base[k as usize] += f);
        }
        let mut names: Vec<usize> = (0..keys).collect();
        names.sort_unstable_by_key(|&n| rank[n]);
        for n in names {
            let flows = base[n];
            (base[n], *next) = (*next, *next + flows);
        }
        let counts: Vec<_> = counts
            .into_iter()
            .map(|(recs, groups, at, mut flows)| {
                for (k, f) in &mut flows {
                    (*f, base[*k as usize]) = (base[*k as usize], base[*k as usize] + *f);
                }
                (recs, groups, at, flows)
            })
            .collect();
        let numbered = on_threads(counts, threads, |(recs, mut groups, at, mut bases)| {
            // The partition's groups in value order, each key's flows numbered on.
            let mut order: Vec<u32> = (0..groups.len() as u32).collect();
            order.sort_unstable_by_key(|&g| {
                let (key, value) = groups[g as usize].key;
                (rank[key as usize], value)
            });
            for &g in &order {
                let g = &mut groups[g as usize];
                let i = bases.binary_search_by_key(&g.key.0, |&(k, _)| k).expect("counted");
                g.flow = bases[i].1;
                bases[i].1 += g.flows();
            }
            let done: Vec<Done> = recs
                .iter()
                .zip(&at)
                .map(|(r, &g)| {
                    let g = &mut groups[g as usize];
                    let flows = if g.large { Flows::large(1) } else { g.next(r.role, r.member()) };
                    Done { n: r.n, k: r.k, stream: r.stream, flows }
                })
                .collect();
            let large: Vec<Group> = groups.into_iter().filter(|g| g.large).collect();
            (done, large)
        });
        let mut large = IdMap::default();
        let mut done: Vec<Vec<Done>> = Vec::with_capacity(numbered.len());
        for (d, l) in numbered {
            done.push(d);
            large.extend(l.into_iter().map(|g| (g.key, g)));
        }
        // Back to record order, each process by itself (its notes are a run of numbers and its
        // streams a run of streams), on the same threads.
        let mut first_stream = 0;
        let processes: Vec<_> = streams
            .iter()
            .zip(&starts)
            .enumerate()
            .map(|(p, (&n, &start))| {
                let end = starts.get(p + 1).copied().unwrap_or(noted);
                let streams = first_stream..first_stream + n;
                first_stream += n;
                (streams, start..end)
            })
            .collect();
        let queues =
            on_threads(processes, threads, |(streams, notes)| in_record_order(&done, streams, notes));
        drop(done);
        Correlations { queues, large }
    }
}

/// The queues of one process's `streams` from its noted members, numbered `notes`, which the
/// partitions `done` hold each in number order: a window of numbers at a time, each partition
/// giving the window a run from where it stopped.
fn in_record_order(done: &[Vec<Done>], streams: Range<usize>, notes: Range<u64>) -> Vec<Queue> {
    let first = streams.start;
    let mut queues: Vec<Queue> = streams.map(|s| Queue { stream: s as u32, ..Queue::default() }).collect();
    let mut next_k = vec![0u64; queues.len()];
    let mut cursors: Vec<usize> =
        done.iter().map(|part| part.partition_point(|d| d.n < notes.start)).collect();
    let mut window: Vec<Option<Done>> = vec![None; WINDOW.min(notes.end - notes.start) as usize];
    let mut start = notes.start;
    while start < notes.end {
        let end = start.saturating_add(WINDOW).min(notes.end);
        for (part, at) in done.iter().zip(&mut cursors) {
            while let Some(d) = part.get(*at).filter(|d| d.n < end) {
                window[(d.n - start) as usize] = Some(*d);
                *at += 1;
            }
        }
        for d in window.iter_mut().filter_map(Option::take) {
            let s = d.stream as usize - first;
            let (q, k) = (&mut queues[s], &mut next_k[s]);
            // Items missing between two notes are members of large groups.
            if d.k > *k {
                q.push(Flows::large(d.k - *k));
            }
            q.push(d.flows);
            *k = d.k + 1;
        }
        start = end;
    }
    queues
}

/// The index of group `key` in `groups`, added if new.
pub(super) fn group(
    index: &mut HashMap<GroupKey, u32, IdHash>,
    groups: &mut Vec<Group>,
    key: GroupKey,
) -> u32 {
    let at = *index.entry(key).or_insert(groups.len() as u32);
    if at as usize == groups.len() {
        groups.push(Group { key, ..Group::default() });
    }
    at
}
