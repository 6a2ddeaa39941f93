//! The traces of real MPI programs that `benches/real-traces.sh` records, as the benches find
//! them: one directory per run (a *set*), one `rank*.bin` per process.
//!
//! A bench takes [`sets`] and makes one row per set (and per way of reading it); a set the
//! script did not record is simply not there, and [`sets`] says so once. Adding a program to
//! the script adds its rows to every bench that reads the sets.

use std::path::PathBuf;

/// One recorded run: its files in rank order and their size in all.
#[derive(Clone, Debug)]
pub struct TraceSet {
    /// The directory's name (`netpipe`, `lammps-8`, ...), the rows' name.
    pub name: String,
    /// `rank0.bin`, `rank1.bin`, ..., by rank.
    pub files: Vec<PathBuf>,
    /// Their bytes in all.
    pub bytes: u64,
}

/// Where the script writes the sets and the benches read them: `$WAFFLE_BENCH_TRACES`, else
/// `$CARGO_TARGET_DIR/bench-traces`, else the workspace's `target/bench-traces`.
pub fn dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("WAFFLE_BENCH_TRACES") {
        return dir.into();
    }
    let target = match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"),
    };
    target.join("bench-traces")
}

/// The sets in [`dir`], by name; each has at least one file. When there are none, prints
/// (once per call, to stderr, prefixed by `who`) that their rows are skipped and how to record
/// them.
pub fn sets(who: &str) -> Vec<TraceSet> {
    let dir = dir();
    let mut sets: Vec<TraceSet> = std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().to_str()?.to_owned();
            let mut files: Vec<(u32, PathBuf)> = std::fs::read_dir(entry.path())
                .ok()?
                .flatten()
                .filter_map(|f| {
                    let file = f.file_name();
                    let rank = file.to_str()?.strip_prefix("rank")?.strip_suffix(".bin")?.parse().ok()?;
                    Some((rank, f.path()))
                })
                .collect();
            files.sort();
            let files: Vec<PathBuf> = files.into_iter().map(|(_, path)| path).collect();
            let bytes = files.iter().map(|f| std::fs::metadata(f).map_or(0, |m| m.len())).sum();
            (!files.is_empty()).then_some(TraceSet { name, files, bytes })
        })
        .collect();
    sets.sort_by(|a, b| a.name.cmp(&b.name));
    if sets.is_empty() {
        eprintln!(
            "{who}: no real traces in {} (benches/real-traces.sh records them): their rows are skipped",
            dir.display()
        );
    }
    for set in &sets {
        eprintln!("{who}: real traces {}: {} files, {} bytes", set.name, set.files.len(), set.bytes);
    }
    sets
}
