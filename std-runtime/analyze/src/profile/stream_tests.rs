//! The profile read from files as a stream gives the profile of their decoded model: the same
//! rows, ranks and messages, durations within a nanosecond per span (the stream sums ticks and
//! converts once), on two ranks recorded each in a process of its own: nested spans, spans on a
//! second thread, messages both ways, a span still open when the recording stopped, and a
//! copy of a file cut short.

use super::{profile, profile_files, Profile};
use crate::decode::decode_files;
use std::path::{Path, PathBuf};

/// Where [`a_rank_recorded_alone`] records, and which rank.
const RECORD: &str = "WAFFLE_PROFILE_STREAM_RECORD";

/// Rank `rank` of two: 30 steps, each a computation with a kernel inside and a message each
/// way; a helper thread's work; on rank 1, a span still open at the stop.
fn record(path: &Path, rank: i64) {
    // One launch's trace id, as a launcher gives every rank.
    let id = waffle::TraceId::from_u128(0x5eed);
    let session =
        waffle_std::Config::new(path).label("rank", rank.to_string()).trace_id(id).start().expect("start");
    let other = 1 - rank;
    let helper = std::thread::spawn(|| {
        for _ in 0..10 {
            let _h = waffle::span!("helper");
            std::hint::black_box((0..2_000u64).sum::<u64>());
        }
    });
    let main = waffle::span!("solve");
    for i in 0..30u64 {
        let _step = waffle::span!("step", step = i);
        {
            let _c = waffle::span!("compute");
            let _k = waffle::span!("kernel");
            std::hint::black_box((0..(1_000 * (rank as u64 + 1))).sum::<u64>());
        }
        {
            let _s =
                waffle::span!("send", peer = other, correlate = ("mpi.message>", (rank as u64) << 32 | i));
        }
        let _r = waffle::span!("receive", peer = other);
        let (bytes, value) = (64 * (i + 1), (other as u64) << 32 | i);
        waffle::event!("MPI message received", bytes, peer = other, correlate = ("mpi.message<", value));
    }
    drop(main);
    helper.join().unwrap();
    let open = (rank == 1).then(|| waffle::span!("open at stop"));
    session.stop().expect("stop");
    drop(open);
}

/// Not a test on its own: records one rank when [`RECORD`] says so, in a process of its own.
#[test]
fn a_rank_recorded_alone() {
    let Ok(what) = std::env::var(RECORD) else { return };
    let (path, rank) = what.split_once(',').expect("path,rank");
    record(Path::new(path), rank.parse().unwrap());
    std::process::exit(0);
}

/// The two ranks' files, and a copy of rank 0's cut short.
fn run() -> Vec<PathBuf> {
    crate::recorded::ranks("profile-stream", "profile::stream_tests::a_rank_recorded_alone", RECORD, 2, "")
}

/// Both profiles of `paths`, which must agree.
fn both(paths: &[PathBuf]) -> Profile {
    let decoded = decode_files(paths).expect("decode");
    let model = profile(&decoded.trace);
    let (files, warnings) = profile_files(paths).expect("read");
    assert_eq!(warnings, decoded.warnings);
    assert_eq!((&files.ranks, &files.matrix, &files.notes), (&model.ranks, &model.matrix, &model.notes));
    assert_eq!(files.rows.len(), model.rows.len());
    // Each span's duration converted alone is under 1 ns off the sum converted once; a self
    // time is a duration less its children's, each that far off.
    let spans = |rank: i64| model.rows.iter().filter(|r| r.rank == rank).map(|r| r.count).sum::<u64>();
    for (f, m) in files.rows.iter().zip(&model.rows) {
        assert_eq!((f.rank, &f.name, f.count), (m.rank, &m.name, m.count));
        assert!(f.total_ns.abs_diff(m.total_ns) <= f.count, "{f:?} against {m:?}");
        assert!(f.self_ns.abs_diff(m.self_ns) <= spans(f.rank), "{f:?} against {m:?}");
    }
    model
}

#[test]
fn streaming_profiles_what_the_model_profiles() {
    let paths = run();
    let p = both(&paths[..2]);
    let row = |rank: i64, name: &str| p.rows.iter().find(|r| r.rank == rank && r.name == name).cloned();
    for rank in [0, 1] {
        let count = |name| row(rank, name).map_or(0, |r| r.count);
        assert_eq!([count("step"), count("kernel"), count("helper"), count("solve")], [30, 30, 10, 1]);
        let compute = row(rank, "compute").unwrap();
        assert!(compute.self_ns < compute.total_ns, "the kernel's time is not the computation's own");
    }
    assert_eq!(row(1, "open at stop").map(|r| (r.count, r.total_ns)), Some((1, 0)));
    assert_eq!(p.ranks.iter().map(|r| r.threads).collect::<Vec<_>>(), [2, 2]);
    let bytes: u64 = (1..=30).map(|i| 64 * i).sum();
    assert_eq!((p.matrix.count[0][1], p.matrix.bytes[0][1]), (30, bytes));
    assert_eq!((p.matrix.count[1][0], p.matrix.bytes[1][0]), (30, bytes));
    // Rank 0's copy cut short stands in for rank 0: what it holds, and a note.
    let cut = both(&[paths[2].clone(), paths[1].clone()]);
    assert!(cut.notes.iter().any(|n| n.contains("did not end cleanly")), "{:?}", cut.notes);
    let spans = |p: &Profile| p.rows.iter().filter(|r| r.rank == 0).map(|r| r.count).sum::<u64>();
    assert!(spans(&cut) < spans(&p));
    std::fs::remove_dir_all(paths[0].parent().unwrap()).ok();
}
