//! Where a run's time went (`waffle-decode profile`): per rank and span name, how many, how
//! long in all and in themselves, and what share of the rank's time; the time each rank spent in
//! MPI; and the messages between each pair of ranks, as counts and bytes (the communication
//! matrix).
//!
//! - A rank's **wall time** runs from its earliest span's begin to its latest span's end.
//! - A span's **self time** is its time less its children's on its thread.
//! - A rank's **MPI time** is the time of its outermost MPI calls (an MPI call inside another,
//!   such as `MPI_Start` inside `MPI_Startall`, counts once), summed over its threads.
//! - Messages are counted where their receive completed (`mpi.message<`), from the rank its
//!   `peer` field names, with the bytes that arrived; a send never received is not in the
//!   matrix.
//!
//! [`profile_files`] reads the files as a stream of records into sums (`stream.rs`,
//! `tally.rs`): a span is added to its name's row when it ends and then forgotten, so memory
//! grows with the names and the spans open at once, not with the run. Durations are summed in
//! clock ticks and converted once, so a total can differ from the sum of each span's converted
//! duration by under a nanosecond per span.
//!
//! The page ([`Profile::to_html`]) is one self-contained HTML file: a heat map of the matrix and
//! a bar per rank of its MPI and other time, drawn by its own script from the JSON it embeds.
//!
//! ```
//! use waffle_analyze::profile;
//! # let trace = waffle_read::model::Trace::default();
//! let p = profile::profile(&trace);
//! assert!(p.rows.is_empty());
//! print!("{}", p.to_text());
//! ```

use std::{collections::HashMap, path::Path};

use crate::{
    model::Trace,
    reader::Warning,
    timeline::{check_facts, int, notes_of, Builder, MPI},
    RunError,
};

mod html;
mod render;
mod stream;
#[cfg(test)]
mod stream_tests;
mod tally;
#[cfg(test)]
mod tests;

/// One span name on one rank.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// The rank.
    pub rank: i64,
    /// The span name.
    pub name: String,
    /// How many spans of the name.
    pub count: u64,
    /// Their time in all.
    pub total_ns: u64,
    /// Their time less their children's.
    pub self_ns: u64,
    /// `total_ns` as a share of the rank's wall time, in %.
    pub percent: f64,
}

/// One rank's time.
#[derive(Clone, Debug, PartialEq)]
pub struct RankTime {
    /// The rank.
    pub rank: i64,
    /// From its earliest span's begin to its latest span's end.
    pub wall_ns: u64,
    /// In its outermost MPI calls, summed over its threads.
    pub mpi_ns: u64,
    /// Its threads.
    pub threads: usize,
}

/// Messages between ranks: `count[from][to]` and `bytes[from][to]`, indices into `ranks`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Matrix {
    /// The ranks, in order.
    pub ranks: Vec<i64>,
    /// Messages, `[from][to]`.
    pub count: Vec<Vec<u64>>,
    /// Bytes that arrived, `[from][to]`.
    pub bytes: Vec<Vec<u64>>,
}

/// The profile of a run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Profile {
    /// By rank, then the most total time first.
    pub rows: Vec<Row>,
    /// By rank.
    pub ranks: Vec<RankTime>,
    /// The messages between ranks.
    pub matrix: Matrix,
    /// What the reader should know about the input (files that end early).
    pub notes: Vec<String>,
}

/// The profile of a decoded run.
pub fn profile(trace: &Trace) -> Profile {
    let mut b = Builder::new();
    let mut tallies = Vec::new();
    for (p, process) in trace.processes.iter().enumerate() {
        b.process(&process.source, &process.header);
        let mut tally = tally::FileTally::default();
        for thread in &process.threads {
            // Begun in order, each inside its parent; ended innermost first.
            let mut spans: Vec<&crate::model::Span> = thread.spans.iter().collect();
            spans.sort_by_key(|s| (s.start_ns, s.depth));
            let mut handles = HashMap::new();
            let mut begun = Vec::new();
            for s in spans {
                let site = b.site(&s.callsite);
                let parent = s.parent.and_then(|id| handles.get(&id).copied());
                let h = tally.begin(parent, s.start_ns, site.name, site.kind & MPI != 0);
                if s.id != 0 {
                    handles.insert(s.id, h);
                }
                begun.push((h, s.end_ns));
            }
            for e in &thread.events {
                let site = b.site(&e.callsite);
                if site.received && e.parent.is_some_and(|id| handles.contains_key(&id)) {
                    let got = site.read(|k| int(e.fields.get(k)), |_| None);
                    if let Some(from) = got.from {
                        tally.received(from, got.bytes);
                    }
                }
            }
            for (h, end) in begun.into_iter().rev() {
                tally.end(h, end);
            }
        }
        let tallied = tally.finish(None, process.threads.len());
        let facts = &mut b.run.processes[p];
        (facts.complete, facts.last_ns, facts.times) = (process.complete, trace.last_ns(p), tallied.times);
        tallies.push(tallied);
    }
    let notes = notes_of(&b.run.processes, &[]);
    assemble(&b, tallies, notes)
}

/// The profile of the processes `b` read, from their tallies (in the same order).
fn assemble(b: &Builder, tallies: Vec<tally::Tallied>, notes: Vec<String>) -> Profile {
    let run = &b.run;
    let mut order: Vec<i64> = run.ranks.clone();
    order.sort_unstable();
    order.dedup();
    let index: HashMap<i64, usize> = order.iter().enumerate().map(|(k, &r)| (r, k)).collect();
    let mut rows: HashMap<(i64, u32), Row> = HashMap::new();
    let mut spans_of: Vec<Option<(u64, u64)>> = vec![None; order.len()];
    let mut ranks: Vec<RankTime> =
        order.iter().map(|&rank| RankTime { rank, wall_ns: 0, mpi_ns: 0, threads: 0 }).collect();
    let n = order.len();
    let mut matrix = Matrix { ranks: order.clone(), count: vec![vec![0; n]; n], bytes: vec![vec![0; n]; n] };
    for (p, t) in tallies.into_iter().enumerate() {
        let rank = run.ranks[p];
        let r = index[&rank];
        ranks[r].threads += t.threads;
        ranks[r].mpi_ns += t.mpi_ns;
        if let Some((a, z)) = t.times {
            let w = &mut spans_of[r];
            *w = Some(w.map_or((a, z), |(first, last)| (first.min(a), last.max(z))));
        }
        for (name, sums) in t.sums {
            let row = rows.entry((rank, name)).or_insert_with(|| Row {
                rank,
                name: run.names[name as usize].clone(),
                count: 0,
                total_ns: 0,
                self_ns: 0,
                percent: 0.0,
            });
            row.count += sums.count;
            row.total_ns += sums.total;
            row.self_ns += sums.self_time;
        }
        for (from, (count, bytes)) in t.received {
            if let Some(&from) = index.get(&from) {
                matrix.count[from][r] += count;
                matrix.bytes[from][r] += bytes;
            }
        }
    }
    for (t, w) in ranks.iter_mut().zip(&spans_of) {
        t.wall_ns = w.map_or(0, |(first, last)| last.saturating_sub(first));
    }
    let mut rows: Vec<Row> = rows.into_values().collect();
    for row in &mut rows {
        let wall = ranks[index[&row.rank]].wall_ns;
        row.percent = if wall == 0 { 0.0 } else { 100.0 * row.total_ns as f64 / wall as f64 };
    }
    rows.sort_by(|a, b| a.rank.cmp(&b.rank).then(b.total_ns.cmp(&a.total_ns)).then(a.name.cmp(&b.name)));
    Profile { rows, ranks, matrix, notes }
}

/// [`profile`] of the files of one run, checked as [`crate::waits::waits_files`] checks them.
/// The files are read as a stream into sums: memory grows with the names and the spans open at
/// once, not with the records.
pub fn profile_files<P: AsRef<Path>>(paths: &[P]) -> Result<(Profile, Vec<Warning>), RunError> {
    let mut b = Builder::new();
    let (tallies, warnings) = stream::read_files(&mut b, paths)?;
    let notes = check_facts(&b.run.processes, &b.run.ranks, &b.run.names)?;
    let notes = notes_of(&b.run.processes, &notes);
    Ok((assemble(&b, tallies, notes), warnings))
}
