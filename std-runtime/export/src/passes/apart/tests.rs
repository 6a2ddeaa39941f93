//! Files written apart against one writer: the same bytes in file order, spilled or not.

use super::*;
use std::{path::PathBuf, sync::mpsc};

/// Files written out of order come out in file order: the first waits until the second
/// is written, whose output (with nothing allowed to wait in memory in tests) goes through a
/// temporary file; an error is the first in file order.
#[test]
fn outputs_come_out_in_file_order_whatever_order_they_are_written_in() {
    let dir = std::env::temp_dir().join(format!("waffle-apart-order-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let paths: Vec<PathBuf> = (0..3).map(|i| dir.join(format!("{i}.bin"))).collect();
    paths.iter().for_each(|p| std::fs::write(p, b"any bytes").unwrap());
    let files = Scanned { inputs: paths.iter().map(|p| Input::new(p)).collect(), plan: (), warnings: vec![] };
    let bytes = |i: usize| -> Vec<u8> { (0..3000).map(|k| (i * 7 + k) as u8).collect() };
    let run = |fail: Option<usize>| {
        let (second_done, first_waits) = mpsc::channel::<()>();
        let first_waits = Mutex::new(first_waits);
        let mut out = Vec::new();
        let result = files.write_apart(vec![0, 1, 2], 3, &mut out, &mut |_| {}, |i, part, _, out| {
            assert_eq!(i, part);
            if i == 0 {
                first_waits.lock().unwrap().recv().unwrap();
            }
            for block in bytes(i).chunks(1000) {
                out.write_all(block)?;
            }
            if i == 1 {
                second_done.send(()).unwrap();
            }
            match fail {
                Some(f) if f <= i => Err(io::Error::other(format!("file {i} failed"))),
                _ => Ok(()),
            }
        });
        (result, out)
    };
    let (result, out) = run(None);
    result.unwrap();
    assert!(out == [bytes(0), bytes(1), bytes(2)].concat());
    let (result, _) = run(Some(1));
    assert_eq!(result.unwrap_err().to_string(), "file 1 failed");
    std::fs::remove_dir_all(&dir).ok();
}
