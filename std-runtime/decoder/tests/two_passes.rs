//! What the two-pass scaffold promises every format (`export::Files`): the first pass learns
//! the processes and warnings the decoder reports, progress counts every byte of both passes,
//! and a file that changes between the passes fails the second one instead of writing a wrong
//! export.

use std::path::PathBuf;

use waffle_export::{Files, Format};
use waffle_read::decode::ProcessStats;

/// A small recorded trace of two threads with a link and a correlation, in `dir`.
fn record(dir: &std::path::Path) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join("run.bin");
    let session = waffle_std::Config::new(&path).start().unwrap();
    let cause = waffle::event!("cause", n = 1u64);
    let worker = std::thread::spawn(move || {
        for i in 0..20u64 {
            let _s = waffle::span!("work", i, caused_by = [cause]);
            let _e = waffle::event!("tick", i);
        }
    });
    for i in 0..20u64 {
        let _s = waffle::span!("main_step", i);
    }
    worker.join().unwrap();
    session.stop().unwrap();
    path
}

#[test]
fn every_format_reads_twice_and_notices_a_change() {
    let dir = std::env::temp_dir().join(format!("waffle-two-passes-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let path = record(&dir);
    let size = std::fs::metadata(&path).unwrap().len();
    let decoded = waffle_read::decode::decode_files(&[&path]).unwrap();
    let stats: Vec<_> = decoded.trace.processes.iter().map(ProcessStats::of).collect();
    for &format in Format::ALL {
        let mut read = 0u64;
        let files = Files::scan(&[&path], format, &mut |n| read += n).expect("scan");
        assert_eq!(read, size, "{format:?}: the first pass reads the file once");
        assert_eq!(files.processes(), stats, "{format:?}: the first pass learns the processes");
        assert_eq!(files.warnings(), decoded.warnings, "{format:?}");
        files.write(&mut Vec::new(), &mut |n| read += n).expect("write");
        assert_eq!(read, 2 * size, "{format:?}: progress counts both passes");

        let grown = dir.join("grown.bin");
        std::fs::copy(&path, &grown).unwrap();
        let files = Files::scan(&[&grown], format, &mut |_| {}).expect("scan");
        let mut bytes = std::fs::read(&grown).unwrap();
        bytes.extend_from_slice(&[0; 16]);
        std::fs::write(&grown, bytes).unwrap();
        let err = files.write(&mut Vec::new(), &mut |_| {}).expect_err("the file changed");
        assert!(err.to_string().contains("changed while it was read"), "{format:?}: {err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
