//! Files read on several threads give the same bytes as on one: every format, exported from
//! several files with 1 and 2 threads, and Perfetto (both of whose passes read files apart)
//! also with 3 and 8 (`Files::scan_threads`, `waffle-decode -j N`), writes the same output. The files refer to one another every way a trace can: links to
//! items of earlier files, contexts entered across files, messages between ranks (directed
//! correlations), a correlation group over every file large enough to leave the first pass's
//! cache of groups, spans matched by order across ranks, detached spans, lost records, and a
//! device track.

#[path = "../../recorder/tests/common/mod.rs"]
mod common;

use common::{block_on, YieldOnce};
use std::{
    path::{Path, PathBuf},
    process::Command,
};
use waffle::{Context, EventId, Instrument};
use waffle_export::{Files, Format};

/// `ranks` files, one session each, recorded one after the other in this process: each rank
/// links to and enters the context of the rank before it, and sends it messages.
fn ranks(dir: &Path, ranks: usize) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let (mut cause, mut ctx) = (EventId::NULL, None::<Context>);
    for rank in 0..ranks as u64 {
        let file = dir.join(format!("rank{rank}.bin"));
        let session = waffle_std::Config::new(&file)
            .label("rank", rank.to_string())
            .staging_bytes(512)
            .start()
            .unwrap();
        let (last_cause, last_ctx) = (cause, ctx.take());
        let (next_cause, next_ctx) = std::thread::scope(|s| {
            let worker = s.spawn(move || {
                // Inside a span of the rank before: its child, off its track.
                let _in = last_ctx.as_ref().map(Context::enter);
                let _served = waffle::span!("serve", rank);
                for i in 0..300u64 {
                    // One group over every file, far more members than the cache notes.
                    waffle::event!("tick", i, correlate = ("epoch", 1u64));
                }
            });
            let mut prev = EventId::NULL;
            let mut keep = (EventId::NULL, None);
            for i in 0..60u64 {
                // The same operation on every rank: matched by order.
                let _step = waffle::span!("allreduce", i);
                if rank > 0 {
                    let message = (rank - 1) << 32 | i;
                    let _recv = waffle::span!("MPI_Recv", peer = rank as i64 - 1);
                    waffle::event!("received", correlate = ("mpi.message<", message));
                }
                let _send = waffle::span!(
                    "MPI_Send",
                    peer = rank as i64 + 1,
                    correlate = ("mpi.message>", rank << 32 | i)
                );
                prev = waffle::event!("mark", caused_by = [prev, last_cause], i);
                if i == 7 {
                    keep = (prev, Some(Context::current()));
                }
                if i % 40 == 0 {
                    block_on(YieldOnce(false).instrument(waffle::span!("task", i)));
                }
            }
            worker.join().unwrap();
            keep
        });
        if rank == 1 {
            let gpu = waffle::Track::new("GPU 0", 1_000_000_000);
            gpu.sync(1_000);
            let launch = waffle::span!("launch");
            let launched_by = launch.id();
            drop(launch);
            waffle::track_slice!(gpu, "kernel", 2_000, 3_000, launched_by = launched_by);
            gpu.sync(4_000);
        }
        session.stop().unwrap();
        (cause, ctx) = (next_cause, next_ctx);
        files.push(file);
    }
    files
}

/// A producer that outruns a small queue: dropped records, stand-ins, unfinished spans.
fn lossy(path: &Path) -> PathBuf {
    let session = waffle_std::Config::new(path)
        .label("rank", "9")
        .queue_bytes(4 << 10)
        .staging_bytes(256)
        .drain_interval(std::time::Duration::from_millis(20))
        .start()
        .unwrap();
    std::thread::spawn(|| {
        for i in 0..20_000u64 {
            let _a = waffle::span!("allreduce", i);
            waffle::event!("tick", i, correlate = ("epoch", 1u64));
        }
    })
    .join()
    .unwrap();
    session.stop().unwrap();
    path.to_owned()
}

fn export(files: &[PathBuf], format: Format, threads: usize) -> Vec<u8> {
    let scanned = Files::scan_threads(files, format, threads, &mut |_| {}).unwrap();
    let mut out = Vec::new();
    scanned.write(&mut out, &mut |_| {}).unwrap();
    out
}

#[test]
fn files_read_on_many_threads_give_the_same_bytes() {
    let dir = std::env::temp_dir().join(format!("waffle-parallel-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut files = ranks(&dir, 5);
    files.push(lossy(&dir.join("lossy.bin")));

    for &format in Format::ALL {
        let one = export(&files, format, 1);
        assert!(one.len() > 10_000, "{}: {} bytes", format.name(), one.len());
        // Only Perfetto reads files apart: the others check the interface.
        let many: &[usize] = if format == Format::Perfetto { &[2, 3, 8] } else { &[2] };
        for &threads in many {
            assert!(export(&files, format, threads) == one, "{} with {threads} threads", format.name());
        }
    }
    // Perfetto writes these files apart too: they share no ids.
    let scanned = Files::scan_threads(&files, Format::Perfetto, 3, &mut |_| {}).unwrap();
    assert_eq!(scanned.write_threads(), 3);
    // Given twice, a file shares its ids with itself: written by one writer, the same bytes.
    let twice = [files.clone(), files[..2].to_vec()].concat();
    assert_eq!(Files::scan_threads(&twice, Format::Perfetto, 3, &mut |_| {}).unwrap().write_threads(), 1);
    assert!(export(&twice, Format::Perfetto, 1) == export(&twice, Format::Perfetto, 3));
    // What the Perfetto export draws across files is there to be the same.
    let pftrace = String::from_utf8_lossy(&export(&files, Format::Perfetto, 2)).into_owned();
    for annotation in ["waffle.matched_by_order", "waffle.caused_by", "waffle.correlate", "GPU 0"] {
        assert!(pftrace.contains(annotation), "{annotation}");
    }

    // Progress hears of every byte read, on the calling thread.
    let read = |threads| {
        let mut read = 0;
        Files::scan_threads(&files, Format::Perfetto, threads, &mut |n| read += n).unwrap();
        read
    };
    let sizes: u64 = files.iter().map(|f| std::fs::metadata(f).unwrap().len()).sum();
    assert_eq!((read(1), read(3)), (sizes, sizes));

    // The file order is the process order, whichever file a thread reads first.
    let reversed: Vec<PathBuf> = files.iter().rev().cloned().collect();
    assert_eq!(export(&reversed, Format::Perfetto, 1), export(&reversed, Format::Perfetto, 4));

    // The command line: -j 1 and -j 2 write the same file.
    let exe = env!("CARGO_BIN_EXE_waffle-decode");
    let written: Vec<Vec<u8>> = ["1", "2"]
        .iter()
        .map(|j| {
            let out = dir.join(format!("j{j}.pftrace"));
            let status =
                Command::new(exe).args(&files).arg("-o").arg(&out).args(["-q", "-j", j]).status().unwrap();
            assert!(status.success());
            std::fs::read(out).unwrap()
        })
        .collect();
    assert!(written[0] == written[1] && written[0] == export(&files, Format::Perfetto, 1));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn an_error_is_the_first_file_s_in_file_order() {
    let dir = std::env::temp_dir().join(format!("waffle-parallel-errors-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (bad, missing) = (dir.join("bad.bin"), dir.join("missing.bin"));
    std::fs::write(&bad, b"not a trace").unwrap();
    let files = [bad.clone(), missing];
    for threads in [1, 2] {
        let Err(e) = Files::scan_threads(&files, Format::Perfetto, threads, &mut |_| {}) else {
            panic!("{threads} threads: no error")
        };
        assert!(e.to_string().contains("bad.bin"), "{threads} threads: {e}");
    }
    std::fs::remove_dir_all(&dir).ok();
}
