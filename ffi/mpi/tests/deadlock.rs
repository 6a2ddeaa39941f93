//! `waffle-decode hang` on what the library records. A program that finishes cleanly
//! (`programs/ring.c`) was stuck nowhere: nothing waits, no message is unmatched, no deadlock. A
//! deadlocked one (`programs/deadlock.c`: every rank receives from its right neighbour before
//! sending) run under `timeout -s TERM 6 mpirun -np 3` with `libwaffle_mpi.so` preloaded is
//! stopped, and each rank's file holds its open `MPI_Recv`, which `hang` reads as the
//! cycle 0 → 1 → 2 → 0.
//!
//! Needs Open MPI; skipped without it, except under `CI=true` or `WAFFLE_REQUIRE_MPI`.

mod support;

use std::process::Command;
use support::{
    build,
    common::{mpi::mpi_tool, scratch, which},
    preloaded_run, record, span_int,
};
use waffle_analyze::hang::hang;

#[test]
fn a_clean_run_was_stuck_nowhere() {
    let Some(trace) = record("ring") else { return };
    let report = hang(&trace);
    assert!(report.threads.iter().all(|t| t.open.is_empty()), "{:#?}", report.threads);
    assert!(report.waits.is_empty() && report.deadlocks.is_empty(), "{report:#?}");
    assert!(report.unmatched_sends.is_empty() && report.unmatched_receives.is_empty(), "{report:#?}");
}

/// Runs the deadlock under `timeout`; returns the directory of the traces.
fn deadlocked() -> Option<std::path::PathBuf> {
    let mpicc = mpi_tool("mpicc")?;
    let mpirun = which("mpirun").expect("mpirun next to mpicc");
    let timeout = which("timeout").expect("timeout (coreutils)");
    let dir = scratch(&format!("mpi-deadlock-{:?}", std::thread::current().id()).replace(['(', ')'], ""));
    let exe = build(&mpicc, "deadlock", &dir);
    let out = dir.join("out");
    let run = preloaded_run(&mpirun, &exe, &out);
    let mut cmd = Command::new(timeout);
    cmd.args(["-s", "TERM", "6"]).arg(run.get_program()).args(run.get_args());
    for (k, v) in run.get_envs() {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    let status = cmd.output().expect("run timeout mpirun").status;
    assert!(!status.success(), "a deadlocked run was stopped, not finished: {status}");
    Some(out)
}

/// The deadlock, stopped by `timeout`'s SIGTERM (which mpirun passes on to the ranks): every
/// rank's file holds the receive its thread was blocked in (the collector's copy of what it had
/// staged), and `hang` names the cycle, in its report and on the command line.
#[test]
fn each_rank_of_a_deadlock_ends_inside_its_open_receive() {
    let Some(out) = deadlocked() else { return };
    let files: Vec<_> = (0..3).map(|r| out.join(format!("rank{r}.bin"))).collect();
    let decoded = waffle_read::decode::decode_files(&files).expect("decode");
    for p in &decoded.trace.processes {
        let rank: i64 = p.header.label("rank").unwrap().parse().unwrap();
        // Whether END made it depends on mpirun: it follows the SIGTERM it passes on with a
        // SIGKILL after a delay, which a loaded machine can beat (recorder/tests/signals.rs proves
        // the SIGTERM path on a child of its own). What the collector had copied is there anyway.
        let open: Vec<_> = p.threads.iter().flat_map(|t| &t.spans).filter(|s| !s.ended).collect();
        let recv =
            open.iter().find(|s| s.name() == "MPI_Recv").unwrap_or_else(|| panic!("rank {rank}: {open:?}"));
        assert_eq!(span_int(recv, "peer"), (rank + 1) % 3, "rank {rank} waits for its right neighbour");
    }
    let report = hang(&decoded.trace);
    let cycles: Vec<&Vec<i64>> = report.deadlocks.iter().map(|d| &d.ranks).collect();
    assert_eq!(cycles, [&vec![0, 1, 2]], "{report:#?}");
    let text = Command::new(support::common::waffle_decode())
        .arg("hang")
        .args(&files)
        .output()
        .expect("run waffle-decode hang");
    assert!(text.status.success(), "{}", String::from_utf8_lossy(&text.stderr));
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("deadlock: rank 0 -> rank 1 -> rank 2 -> rank 0"), "{text}");
    let _ = std::fs::remove_dir_all(out.parent().unwrap());
}
