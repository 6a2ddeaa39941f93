//! Where a run's time went (`waffle-decode profile`): per rank and span name, how many, how
//! long in all and in themselves, and what share of the rank's time; the time each rank spent in
//! MPI; and the messages between each pair of ranks, as counts and bytes (the communication
//! matrix).
//!
//! - A rank's **wall time** runs from its earliest span's begin to its latest span's end.
//! - A span's **self time** is its time less its children's on its thread.
//! - A rank's **MPI time** is the time of its outermost MPI calls (an MPI call inside another,
//!   such as `MPI_Start` inside `MPI_Startall`, counts once), summed over its threads.
//! - Messages are counted where their receive completed (`mpi.message<`), with the bytes that
//!   arrived; a send never received is not in the matrix.
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
    timeline::{self, is_mpi, Run},
    RunError,
};

mod html;
mod render;
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
    profile_of(&Run::from_trace(trace))
}

/// The profile of a run read with [`crate::read_run`].
pub fn profile_of(run: &Run) -> Profile {
    let mut order: Vec<i64> = run.ranks.clone();
    order.sort_unstable();
    let index: HashMap<i64, usize> = order.iter().enumerate().map(|(k, &r)| (r, k)).collect();
    let mut rows: HashMap<(i64, u32), Row> = HashMap::new();
    let mut spans_of: Vec<(u64, u64)> = vec![(u64::MAX, 0); order.len()];
    let mut ranks: Vec<RankTime> =
        order.iter().map(|&rank| RankTime { rank, wall_ns: 0, mpi_ns: 0, threads: 0 }).collect();
    for (l, lane) in run.lanes.iter().enumerate() {
        let rank = run.rank(l as u32);
        let r = index[&rank];
        ranks[r].threads += 1;
        let mut children = vec![0u64; lane.spans.len()];
        for (k, s) in lane.spans.iter().enumerate() {
            if let Some(p) = lane.parent[k] {
                children[p as usize] += s.end_ns.saturating_sub(s.start_ns);
            }
        }
        for (k, s) in lane.spans.iter().enumerate() {
            let dur = s.end_ns.saturating_sub(s.start_ns);
            let row = rows.entry((rank, s.name)).or_insert_with(|| Row {
                rank,
                name: run.name(s).to_owned(),
                count: 0,
                total_ns: 0,
                self_ns: 0,
                percent: 0.0,
            });
            row.count += 1;
            row.total_ns += dur;
            row.self_ns += dur.saturating_sub(children[k]);
            let (first, last) = &mut spans_of[r];
            (*first, *last) = ((*first).min(s.start_ns), (*last).max(s.end_ns));
            let mut up = lane.parent[k];
            let mut outermost = is_mpi(s);
            while let (true, Some(p)) = (outermost, up) {
                outermost = !is_mpi(&lane.spans[p as usize]);
                up = lane.parent[p as usize];
            }
            if outermost {
                ranks[r].mpi_ns += dur;
            }
        }
    }
    for (t, &(first, last)) in ranks.iter_mut().zip(&spans_of) {
        t.wall_ns = last.saturating_sub(first);
    }
    let mut rows: Vec<Row> = rows.into_values().collect();
    for row in &mut rows {
        let wall = ranks[index[&row.rank]].wall_ns;
        row.percent = if wall == 0 { 0.0 } else { 100.0 * row.total_ns as f64 / wall as f64 };
    }
    rows.sort_by(|a, b| a.rank.cmp(&b.rank).then(b.total_ns.cmp(&a.total_ns)).then(a.name.cmp(&b.name)));
    let n = order.len();
    let mut matrix = Matrix { ranks: order, count: vec![vec![0; n]; n], bytes: vec![vec![0; n]; n] };
    for m in &run.messages {
        let (from, to) = (index[&run.rank(m.send.lane)], index[&run.rank(m.received_in.lane)]);
        matrix.count[from][to] += 1;
        matrix.bytes[from][to] += m.bytes;
    }
    Profile { rows, ranks, matrix, notes: timeline::cut_notes(run) }
}

/// [`profile`] of the files of one run, checked as [`crate::waits::waits_files`] checks them.
pub fn profile_files<P: AsRef<Path>>(paths: &[P]) -> Result<(Profile, Vec<Warning>), RunError> {
    let (run, warnings) = timeline::read_run(paths)?;
    Ok((profile_of(&run), warnings))
}
