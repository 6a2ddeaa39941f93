//! Files written apart give what one writer over every file gives: each file's writer starts
//! from what the plan says of the files before it (the references to an item they met, the
//! uuids and sequence ids they took), where one writer carries them from file to file.

use crate::{Files, Format, Plans};
use std::path::{Path, PathBuf};
use waffle::{Context, EventId};

/// `ranks` files, each linking to an event of the first rank and entering its context, so
/// that every file after the second meets references the files before it met too.
fn record(dir: &Path, ranks: u64) -> Vec<PathBuf> {
    let (mut origin, mut context) = (EventId::NULL, None::<Context>);
    (0..ranks)
        .map(|rank| {
            let file = dir.join(format!("rank{rank}.bin"));
            let session = waffle_std::Config::new(&file).label("rank", rank.to_string()).start().unwrap();
            let _rank = waffle::span!("rank", rank);
            for i in 0..20u64 {
                let _step = waffle::span!("step", i);
                let mark = waffle::event!("mark", caused_by = [origin], i);
                if rank == 0 && i == 3 {
                    origin = mark;
                    context = Some(Context::current());
                }
                let _in = context.as_ref().filter(|_| rank > 0 && i % 5 == 0).map(Context::enter);
                let _served = waffle::span!("serve", i);
                waffle::event!("work", i);
            }
            drop(_rank);
            session.stop().unwrap();
            file
        })
        .collect()
}

fn export(files: &[PathBuf], threads: usize, apart: bool) -> (Vec<u8>, bool) {
    let mut scanned = Files::scan_threads(files, Format::Perfetto, threads, &mut |_| {}).unwrap();
    let Plans::Perfetto(plan) = &mut scanned.scanned.plan else { panic!("a Perfetto plan") };
    let could = plan.apart;
    plan.apart &= apart;
    let mut out = Vec::new();
    scanned.write(&mut out, &mut |_| {}).unwrap();
    (out, could)
}

#[test]
fn files_written_apart_are_what_one_writer_writes() {
    let dir = std::env::temp_dir().join(format!("waffle-apart-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let files = record(&dir, 4);
    // One writer carrying what it met from file to file.
    let (carried, apart) = export(&files, 1, false);
    assert!(apart, "the files share no ids");
    for threads in [1, 2, 4] {
        assert!(export(&files, threads, true).0 == carried, "{threads} threads");
    }
    // What the later files met was met before too: links and children of one item in every file.
    let text = String::from_utf8_lossy(&carried);
    assert!(text.contains("waffle.caused_by") && text.contains("serve"));
    // The same file twice shares its ids: one writer then, whatever the threads.
    let twice = [files[0].clone(), files[1].clone(), files[0].clone()];
    let (one, apart) = export(&twice, 2, true);
    assert!(!apart, "a file given twice");
    assert!(one == export(&twice, 1, true).0);
    std::fs::remove_dir_all(&dir).ok();
}
