//! That files are one whole run before anything is read into it: one trace id, each rank once,
//! and every rank there that the files name (the `size` label a launcher gives, the ranks from
//! 0 to the highest, the peers and roots of the calls); and what the reader should know of a
//! file that did not end cleanly.

use std::{collections::HashMap, path::PathBuf};

use super::{build, ProcessFacts, Run};
use crate::reader::Warning;

/// Why files cannot be read as one run.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// A file could not be read.
    #[error(transparent)]
    Read(#[from] crate::Error),
    /// Two files hold different trace ids: they were recorded by different launches.
    #[error(
        "{first} and {other} are from different runs (trace ids {first_id:032x} and {other_id:032x}, \
         at different times); give the files of one run"
    )]
    DifferentRuns {
        /// The first file with a trace id.
        first: PathBuf,
        /// Its trace id.
        first_id: u128,
        /// A file with another id, and its id.
        other: PathBuf,
        /// That id.
        other_id: u128,
    },
    /// Two files hold the same rank.
    #[error("{first} and {other} are both rank {rank}; give each rank's file once")]
    DuplicateRank {
        /// The rank.
        rank: i64,
        /// The first file.
        first: PathBuf,
        /// The second file.
        other: PathBuf,
    },
    /// No span of the program's own is in the step asked for.
    #[error("no span of the program's own has a step or iteration field equal to {0}")]
    NoStep(i64),
    /// A rank the run had is not among the files.
    #[error(
        "rank {rank} is missing: {named_by}, but no file given is rank {rank} (files are ranks {given})"
    )]
    MissingRank {
        /// The rank.
        rank: i64,
        /// What names it ("rank0.bin says the run had 4 ranks", "rank 0's MPI_Send sends to it").
        named_by: String,
        /// The ranks given, as text.
        given: String,
    },
}

/// Reads `paths` as one run, checked to be one whole run (one trace id, no rank missing or given
/// twice: [`RunError`]); the warnings of the reading. What [`crate::waits::waits_files`],
/// [`crate::critical_path::critical_path_files`] and [`crate::profile::profile_files`] read.
pub fn read_run<P: AsRef<std::path::Path>>(paths: &[P]) -> Result<(Run, Vec<Warning>), RunError> {
    let mut b = build::Builder::new();
    let warnings = super::stream::read_files(&mut b, paths)?;
    let mut run = b.finish();
    check(&mut run)?;
    Ok((run, warnings))
}

impl Run {
    /// `trace`'s processes as the analyses read them, unchecked.
    pub fn from_trace(trace: &crate::model::Trace) -> Run {
        build::Builder::from_trace(trace)
    }
}

/// What the checks noted, then a note for each file that did not end cleanly: what it holds is
/// analysed, up to its cut.
pub(crate) fn cut_notes(run: &Run) -> Vec<String> {
    notes_of(&run.processes, &run.notes)
}

/// [`cut_notes`] of processes whose [`ProcessFacts::times`] are known, after the checks' `notes`.
pub(crate) fn notes_of(processes: &[ProcessFacts], notes: &[String]) -> Vec<String> {
    let first = processes.iter().filter_map(|p| p.times).map(|t| t.0).min();
    let cut = processes.iter().filter(|p| !p.complete).map(|p| {
        let at = p.last_ns.saturating_sub(first.unwrap_or(0));
        format!(
            "{} did not end cleanly (cut, or its program was killed): read up to its last record, {} into the run",
            p.source,
            crate::units::duration(at)
        )
    });
    notes.iter().cloned().chain(cut).collect()
}

/// That the processes are one whole run (see the module docs); each process's times are taken
/// from its lanes first.
pub(crate) fn check(run: &mut Run) -> Result<(), RunError> {
    for p in &mut run.processes {
        p.times = None;
    }
    for lane in &run.lanes {
        for s in &lane.spans {
            let t = &mut run.processes[lane.process].times;
            *t = Some(t.map_or((s.start_ns, s.end_ns), |(a, b)| (a.min(s.start_ns), b.max(s.end_ns))));
        }
    }
    run.notes = check_facts(&run.processes, &run.ranks, &run.names)?;
    Ok(())
}

/// [`check`] of processes whose times are known: what it noted, or why they are not one run.
/// `names` spells the calls' names that [`ProcessFacts::named`] numbers.
pub(crate) fn check_facts(
    processes: &[ProcessFacts],
    ranks: &[i64],
    names: &[String],
) -> Result<Vec<String>, RunError> {
    let file = |p: usize| PathBuf::from(&processes[p].source);
    let overlap = |a: usize, b: usize| match (processes[a].times, processes[b].times) {
        (Some((a0, a1)), Some((b0, b1))) => a0 <= b1 && b0 <= a1,
        _ => false,
    };
    let with_id = processes.iter().enumerate().filter(|(_, p)| p.header.trace_id != 0);
    let mut first: Option<(usize, u128)> = None;
    let mut notes = Vec::new();
    for (k, p) in with_id {
        match first {
            None => first = Some((k, p.header.trace_id)),
            // Ranks started without a launcher waffle knows draw trace ids of their own; files
            // that ran at the same time are taken for one run, and said so.
            Some((f, id)) if id != p.header.trace_id && overlap(f, k) => notes.push(format!(
                "{} and {} have different trace ids but ran at the same time: read as one run",
                file(f).display(),
                file(k).display()
            )),
            Some((f, id)) if id != p.header.trace_id => {
                return Err(RunError::DifferentRuns {
                    first: file(f),
                    first_id: id,
                    other: file(k),
                    other_id: p.header.trace_id,
                })
            }
            Some(_) => {}
        }
    }
    let mut seen: HashMap<i64, usize> = HashMap::new();
    for (k, &r) in ranks.iter().enumerate() {
        if let Some(&f) = seen.get(&r) {
            return Err(RunError::DuplicateRank { rank: r, first: file(f), other: file(k) });
        }
        seen.insert(r, k);
    }
    let mut sorted = ranks.to_vec();
    sorted.sort_unstable();
    let given = sorted.iter().map(i64::to_string).collect::<Vec<_>>().join(", ");
    let missing =
        |rank: i64, named_by: String| RunError::MissingRank { rank, named_by, given: given.clone() };
    for p in processes {
        if let Some(size) = p.header.label("size").and_then(|s| s.trim().parse::<i64>().ok()) {
            if let Some(r) = (0..size).find(|r| !seen.contains_key(r)) {
                let source = &p.source;
                return Err(missing(r, format!("{source} says the run had {size} ranks")));
            }
        }
    }
    if let Some(&top) = sorted.last() {
        if let Some(r) = (0..top).find(|r| !seen.contains_key(r)) {
            return Err(missing(r, format!("rank {top} is given")));
        }
    }
    for (p, facts) in processes.iter().enumerate() {
        if let Some(&(r, name, key)) = facts.named.iter().find(|n| !seen.contains_key(&n.0)) {
            let how = if key == "root" { "has it as its root" } else { "names it as its peer" };
            let call = &names[name as usize];
            return Err(missing(r, format!("rank {}'s {call} {how}", ranks[p])));
        }
    }
    Ok(notes)
}
